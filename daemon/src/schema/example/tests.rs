use super::*;

fn object(schema: Value) -> JsonObject {
    match schema {
        Value::Object(map) => map,
        other => panic!("test schema must be an object, got {other}"),
    }
}

/// Example arguments for `schema`, checked to be valid against it.
fn example(schema: Value) -> Value {
    let arguments = example_arguments(&object(schema.clone()));
    let validator = jsonschema::validator_for(&schema).expect("test schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&arguments)
        .map(|e| e.to_string())
        .collect();
    assert!(
        errors.is_empty(),
        "{arguments} is invalid against {schema}: {errors:?}"
    );
    arguments
}

/// The example value of one required property `x` with schema `property`.
fn example_of(property: Value) -> Value {
    let schema = json!({"type": "object", "properties": {"x": property}, "required": ["x"]});
    example(schema)["x"].clone()
}

#[test]
fn hints_in_order_of_preference() {
    let cases = [
        (
            json!({"type": "string", "examples": ["first", "second"], "example": "single", "default": "d"}),
            json!("first"),
        ),
        (
            json!({"type": "string", "example": "single", "default": "d"}),
            json!("single"),
        ),
        (json!({"const": "fixed", "default": "d"}), json!("fixed")),
        (
            json!({"type": "integer", "default": 7, "enum": [1, 7]}),
            json!(7),
        ),
        (
            json!({"type": ["string", "null"], "enum": [null, "b", "c"]}),
            json!("b"),
        ),
        (json!({"type": "string", "default": 5}), json!("example")),
        (json!({"type": "string", "default": ""}), json!("example")),
    ];
    for (property, expected) in cases {
        assert_eq!(example_of(property.clone()), expected, "for {property}");
    }
}

#[test]
fn only_required_properties_unless_min_properties() {
    let schema = json!({
        "type": "object",
        "properties": {"owner": {"type": "string"}, "repo": {"type": "string"}, "per_page": {"type": "integer"}},
        "required": ["owner", "repo"]
    });
    assert_eq!(
        example(schema),
        json!({"owner": "octocat", "repo": "hello-world"})
    );
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "minProperties": 2});
    assert_eq!(example(schema), json!({"a": true, "key1": "example"}));
}

#[test]
fn nested_objects_fill_their_required_fields() {
    let schema = json!({
        "type": "object",
        "properties": {
            "filter": {
                "type": "object",
                "properties": {"since": {"type": "string", "format": "date"}, "limit": {"type": "integer"}},
                "required": ["since"]
            }
        },
        "required": ["filter"]
    });
    assert_eq!(example(schema), json!({"filter": {"since": "2025-01-15"}}));
}

#[test]
fn formats() {
    let cases = [
        ("date-time", "2025-01-15T09:30:00Z"),
        ("date", "2025-01-15"),
        ("time", "09:30:00Z"),
        ("email", "user@example.com"),
        ("uri", "https://example.com"),
        ("url", "https://example.com"),
        ("uri-reference", "https://example.com"),
        ("uuid", "123e4567-e89b-42d3-a456-426614174000"),
        ("ipv4", "192.0.2.1"),
        ("ipv6", "2001:db8::1"),
        ("hostname", "example.com"),
    ];
    for (format, expected) in cases {
        let schema = json!({"type": "string", "format": format});
        assert_eq!(example_of(schema), json!(expected), "for format {format}");
    }
}

#[test]
fn names_suggest_readable_strings() {
    let cases = [
        ("file_path", "/path/to/file.txt"),
        ("url", "https://example.com"),
        ("userEmail", "user@example.com"),
        ("issue_id", "abc123"),
        ("query", "example search"),
        ("name", "example"),
        ("owner", "octocat"),
        ("repo", "hello-world"),
        ("repo_name", "hello-world"),
        ("color", "#1A2B3C"),
        ("whatever", "example"),
    ];
    for (name, expected) in cases {
        let schema =
            json!({"type": "object", "properties": {name: {"type": "string"}}, "required": [name]});
        assert_eq!(example(schema)[name], json!(expected), "for {name}");
    }
}

#[test]
fn string_lengths() {
    assert_eq!(
        example_of(json!({"type": "string", "minLength": 10})),
        json!("examplexxx")
    );
    assert_eq!(
        example_of(json!({"type": "string", "maxLength": 3})),
        json!("exa")
    );
}

#[test]
fn patterns_pick_a_matching_candidate() {
    let cases = [
        (r"^[A-Z][A-Z0-9_]+-\d+(?:-\d+)*$", "ABC-123"),
        (r"^[1-9][0-9]*$", "123"),
        (r"^\d{4}-\d{2}-\d{2}$", "2025-01-15"),
        (r"^#[0-9A-Fa-f]{6}$", "#1A2B3C"),
        (r"^[^=]+=[^=]+$", "key=value"),
        (
            r"^[A-Za-z0-9_-]{43}$",
            "examplexxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        (r"^=", "=example"),
    ];
    for (pattern, expected) in cases {
        let schema = json!({"type": "string", "pattern": pattern});
        assert_eq!(example_of(schema), json!(expected), "for pattern {pattern}");
    }
}

#[test]
fn arrays_respect_min_max_and_unique_items() {
    let cases = [
        (
            json!({"type": "array", "items": {"type": "string"}}),
            json!(["example"]),
        ),
        (json!({"type": "array"}), json!([])),
        (
            json!({"type": "array", "items": {"type": "integer"}, "maxItems": 0}),
            json!([]),
        ),
        (
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 3}),
            json!([1, 1, 1]),
        ),
        (
            json!({"type": "array", "items": {"type": "integer", "maximum": 2}, "minItems": 3, "uniqueItems": true}),
            json!([1, 2, 0]),
        ),
        (
            json!({"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 2, "uniqueItems": true}),
            json!(["a", "b"]),
        ),
        (
            json!({"type": "array", "items": {"type": "string"}, "minItems": 2, "uniqueItems": true}),
            json!(["example", "example2"]),
        ),
        (
            json!({"type": "array", "prefixItems": [{"type": "number"}, {"type": "string"}], "minItems": 2}),
            json!([1, "example"]),
        ),
    ];
    for (property, expected) in cases {
        assert_eq!(example_of(property.clone()), expected, "for {property}");
    }
}

#[test]
fn array_elements_are_named_after_the_array() {
    let schema = json!({"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}, "required": ["paths"]});
    assert_eq!(example(schema), json!({"paths": ["/path/to/file.txt"]}));
}

#[test]
fn numbers_within_bounds() {
    let cases = [
        (json!({"type": "integer"}), json!(1)),
        (json!({"type": "integer", "minimum": 5}), json!(5)),
        (json!({"type": "integer", "maximum": -3}), json!(-3)),
        (json!({"type": "integer", "exclusiveMinimum": 5}), json!(6)),
        (
            json!({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}),
            json!(0.5),
        ),
        (
            json!({"type": "integer", "minimum": 7, "multipleOf": 5}),
            json!(10),
        ),
        (json!({"type": "number", "maximum": 0.25}), json!(0.25)),
    ];
    for (property, expected) in cases {
        assert_eq!(example_of(property.clone()), expected, "for {property}");
    }
    let limit = json!({"type": "object", "properties": {"limit": {"type": "integer", "maximum": 5}}, "required": ["limit"]});
    assert_eq!(example(limit), json!({"limit": 5}));
}

#[test]
fn draft_4_boolean_exclusive_bounds() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"x": {"type": "integer", "minimum": 1, "exclusiveMinimum": true, "maximum": 3, "exclusiveMaximum": true}},
        "required": ["x"]
    });
    assert_eq!(example(schema), json!({"x": 2}));
}

#[test]
fn refs_resolve_against_the_root() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/color"},
            "b": {"$ref": "#/definitions/a~1b"},
            "c": {"$ref": "#/properties/a"}
        },
        "required": ["a", "b", "c"],
        "$defs": {"color": {"enum": ["red", "green"]}},
        "definitions": {"a/b": {"type": "integer", "minimum": 3}}
    });
    assert_eq!(example(schema), json!({"a": "red", "b": 3, "c": "red"}));
}

#[test]
fn recursive_refs_terminate() {
    let schema = json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
        "required": ["root"],
        "$defs": {"node": {
            "type": "object",
            "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["label", "children"]
        }}
    });
    let arguments = example_arguments(&object(schema));
    assert_eq!(arguments["root"]["label"], json!("example"));
    let self_loop = json!({"type": "object", "properties": {"x": {"$ref": "#/properties/x"}}, "required": ["x"]});
    assert!(example_arguments(&object(self_loop)).is_object());
}

#[test]
fn hostile_schemas_stop_within_the_budget() {
    // Four alternatives per level, none ever valid: 4^depth tries without a budget.
    let impossible = |key: &str| json!({"type": "object", "properties": {key: {"$ref": "#/$defs/n"}}, "required": [key], "maxProperties": 0});
    let schema = json!({
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/n"}},
        "required": ["x"],
        "$defs": {"n": {"anyOf": [impossible("a"), impossible("b"), impossible("c"), impossible("d")]}}
    });
    let started = std::time::Instant::now();
    assert!(example_arguments(&object(schema))["x"].is_object());
    println!("hostile schema: {:?}", started.elapsed());
}

#[test]
fn any_of_prefers_the_first_valid_non_null_alternative() {
    let cases = [
        (
            json!({"anyOf": [{"type": "null"}, {"type": "integer", "minimum": 2}], "default": null}),
            json!(2),
        ),
        (
            json!({"anyOf": [{"type": "string", "pattern": "^$x"}, {"type": "boolean"}]}),
            json!(true),
        ),
        (
            json!({"oneOf": [{"type": "number"}, {"type": "integer"}, {"type": "string"}]}),
            json!("example"),
        ),
        (json!({"anyOf": [{"type": "null"}]}), json!(null)),
    ];
    for (property, expected) in cases {
        assert_eq!(example_of(property.clone()), expected, "for {property}");
    }
    // Alternatives that only name the required fields.
    let schema = json!({
        "type": "object",
        "properties": {"id": {"type": "string"}, "url": {"type": "string"}},
        "anyOf": [{"required": ["id"]}, {"required": ["url"]}]
    });
    assert_eq!(example(schema), json!({"id": "abc123"}));
}

#[test]
fn all_of_merges_objects() {
    let schema = json!({
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"$ref": "#/$defs/b"}
        ],
        "$defs": {"b": {"properties": {"b": {"type": "integer"}, "a": {"minLength": 8}}, "required": ["b"]}}
    });
    assert_eq!(example(schema), json!({"a": "examplex", "b": 1}));
}

#[test]
fn untyped_schemas() {
    assert_eq!(example_of(json!({})), json!("example"));
    assert_eq!(
        example_of(json!({"properties": {"q": {}}, "required": ["q"]})),
        json!({"q": "example search"})
    );
    assert_eq!(
        example_of(json!({"type": ["null", "boolean"]})),
        json!(true)
    );
    let only_draft = object(json!({"$schema": "http://json-schema.org/draft-07/schema#"}));
    assert_eq!(example_arguments(&only_draft), json!({}));
}

#[test]
fn example_call_is_pretty_json_of_name_and_arguments() {
    let schema = object(
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    );
    let text = example_call("fs_read_file", &schema);
    assert_eq!(
        text,
        "{\n  \"name\": \"fs_read_file\",\n  \"arguments\": {\n    \"path\": \"/path/to/file.txt\"\n  }\n}"
    );
}

/// The correctness bar: every tool of every server in the shared catalog gets
/// an example its own schema accepts.
#[test]
fn every_catalog_example_is_valid() {
    let Some((_, catalog)) = crate::test_catalog::load("example::every_catalog_example_is_valid")
    else {
        return;
    };
    let (mut checked, mut invalid) = (0, Vec::new());
    let (mut uncompilable, mut unsatisfiable_tools) = (Vec::new(), Vec::new());
    for server in catalog["servers"].as_array().expect("servers") {
        for tool in server["tools"].as_array().expect("tools") {
            let label = format!(
                "{}/{}",
                server["id"].as_str().unwrap_or("?"),
                tool["name"].as_str().unwrap_or("?")
            );
            let mut schema = tool["inputSchema"].as_object().cloned().unwrap_or_default();
            // As the daemon exposes them: some children send only `$schema`.
            schema.entry("type").or_insert_with(|| json!("object"));
            let schema_value = Value::Object(schema.clone());
            let validator = match jsonschema::validator_for(&schema_value) {
                Ok(validator) => validator,
                Err(error) => {
                    uncompilable.push(format!("{label}: {error}"));
                    continue;
                }
            };
            let arguments = example_arguments(&schema);
            assert!(arguments.is_object(), "{label}: {arguments}");
            checked += 1;
            let errors: Vec<_> = validator.iter_errors(&arguments).collect();
            // Every error an empty `enum` in a required field: no call can be valid.
            let unsatisfiable = |e: &jsonschema::ValidationError| {
                schema_value.pointer(e.schema_path().as_str()) == Some(&json!([]))
            };
            if !errors.is_empty() && errors.iter().all(unsatisfiable) {
                unsatisfiable_tools.push(format!("{label}: {}", errors[0]));
            } else if !errors.is_empty() {
                let errors: Vec<String> = errors
                    .iter()
                    .map(|e| format!("{} {e}", e.instance_path().as_str()))
                    .collect();
                invalid.push(format!(
                    "{label}: {arguments}\n    {}",
                    errors.join("\n    ")
                ));
            }
        }
    }
    println!(
        "catalog examples: {checked} checked, {} skipped (schema does not compile)",
        uncompilable.len()
    );
    for skipped in &uncompilable {
        println!("  skipped {skipped}");
    }
    println!(
        "{} of them cannot be called at all:",
        unsatisfiable_tools.len()
    );
    for tool in &unsatisfiable_tools {
        println!("  unsatisfiable {tool}");
    }
    assert!(checked > 2000, "only {checked} catalog tools checked");
    assert!(
        invalid.is_empty(),
        "{} invalid examples:\n{}",
        invalid.len(),
        invalid.join("\n")
    );
}
