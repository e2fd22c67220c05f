//! What the servers offer: `evoctl list`, `search`, `describe`,
//! `resources`, `prompts`, `read` and `docs`.

use std::fs;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use evo_proto::ctl::{
    PromptsReport, ReadReport, ResourcesReport, SearchResults, ToolDescription, ToolList,
    session_label,
};
use serde_json::json;

use super::text::{Printout, pretty, table};

/// `evoctl list`: the session it is for, then a line per tool. On stdout,
/// so that whoever reads the list (a pipe, a log) also reads whose it is.
pub fn tools(l: &ToolList) -> Printout {
    let mut p = Printout::default();
    if let Some(s) = &l.session {
        p.line(format!(
            "session {}",
            session_label(s, l.session_name.as_deref())
        ));
    }
    for t in &l.tools {
        let hot = if t.hot { " [hot]" } else { "" };
        p.line(format!("{} — {} ({}){hot}", t.name, t.summary, t.domain));
    }
    p
}

/// `evoctl search`: a table of results, with each stage's score under
/// `--explain`, then the servers the query names that list nothing.
pub fn search(r: &SearchResults) -> Printout {
    let mut p = Printout::default();
    if r.results.is_empty() {
        p.line(format!(
            "no matches: {}",
            r.reason.as_deref().unwrap_or_default()
        ));
    }
    let explain = r.results.iter().any(|t| t.explain.is_some());
    let num = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.3}"));
    let rows: Vec<Vec<String>> = r
        .results
        .iter()
        .map(|t| {
            let mut row = vec![format!("{:.2}", t.score.unwrap_or(0.0))];
            if let Some(e) = t.explain.as_ref().filter(|_| explain) {
                row.push(format!("{:.2}", e.lexical));
                row.push(num(e.semantic));
                row.push(num(e.fused));
                row.push(num(e.learned));
                row.push(match (&e.near_duplicate_of, e.similarity) {
                    (Some(of), Some(sim)) => format!("next to {of} ({sim:.2})"),
                    _ => "-".into(),
                });
            }
            row.extend([t.name.clone(), t.domain.clone(), t.summary.clone()]);
            row
        })
        .collect();
    if !rows.is_empty() && explain {
        p.lines(table(
            &[
                "SCORE", "LEXICAL", "SEMANTIC", "FUSED", "LEARNED", "NEAR-DUP", "TOOL", "DOMAIN",
                "SUMMARY",
            ],
            &rows,
        ));
    } else if !rows.is_empty() {
        p.lines(table(&["SCORE", "TOOL", "DOMAIN", "SUMMARY"], &rows));
    }
    p.lines(r.unavailable.iter().cloned());
    p
}

/// `evoctl describe`: the text the daemon wrote.
pub fn describe(t: &ToolDescription) -> Printout {
    let mut p = Printout::default();
    p.text(t.text.clone());
    p
}

/// `evoctl resources`: a table of resources, then one of templates.
pub fn resources(r: &ResourcesReport) -> Printout {
    let mut p = Printout::default();
    if r.resources.is_empty() && r.templates.is_empty() {
        p.line("no resources: none of the servers evo reaches lists any");
        return p;
    }
    let rows: Vec<Vec<String>> = r
        .resources
        .iter()
        .map(|x| {
            vec![
                x.uri.clone(),
                x.server.clone(),
                x.mime_type.clone().unwrap_or_else(|| "-".into()),
                x.name.clone(),
            ]
        })
        .collect();
    if !rows.is_empty() {
        p.lines(table(&["URI", "SERVER", "MIME", "NAME"], &rows));
    }
    if !r.templates.is_empty() {
        p.line("\ntemplates (a matching URI is read through their server):");
        let rows: Vec<Vec<String>> = r
            .templates
            .iter()
            .map(|t| vec![t.uri_template.clone(), t.server.clone(), t.name.clone()])
            .collect();
        p.lines(table(&["TEMPLATE", "SERVER", "NAME"], &rows));
    }
    p
}

/// `evoctl prompts`: a table of prompts.
pub fn prompts(r: &PromptsReport) -> Printout {
    let mut p = Printout::default();
    if r.prompts.is_empty() {
        p.line("no prompts: none of the servers evo reaches lists any");
        return p;
    }
    let rows: Vec<Vec<String>> = r
        .prompts
        .iter()
        .map(|x| {
            vec![
                x.name.clone(),
                x.server.clone(),
                x.arguments.join(", "),
                x.summary.clone(),
            ]
        })
        .collect();
    p.lines(table(
        &["PROMPT", "SERVER", "ARGUMENTS (* required)", "SUMMARY"],
        &rows,
    ));
    p
}

/// `evoctl read URI`: text contents as they are (ending in a newline), a
/// line about each blob.
pub fn read(r: &ReadReport) -> Printout {
    let mut p = Printout::default();
    for c in &r.contents {
        match (&c.text, &c.blob) {
            (Some(text), _) => {
                p.text(text.clone());
                if !text.ends_with('\n') {
                    p.line("");
                }
            }
            (None, Some(blob)) => p.line(format!(
                "{}: {} of {} bytes (binary); write it to a file with `evoctl read {} --out FILE`",
                c.uri,
                c.mime_type.as_deref().unwrap_or("a blob"),
                decoded_len(blob),
                r.uri
            )),
            (None, None) => p.line(format!("{}: empty", c.uri)),
        }
    }
    p
}

/// Bytes a base64 text decodes to.
fn decoded_len(blob: &str) -> usize {
    let padding = blob.bytes().rev().take_while(|&b| b == b'=').count();
    (blob.len() / 4 * 3).saturating_sub(padding)
}

/// `evoctl read URI --out FILE`: the contents (text as UTF-8, blobs
/// decoded) into FILE, then what was written.
pub fn write_read(r: &ReadReport, path: &Path, json: bool) -> Result<Printout, String> {
    let mut bytes = Vec::new();
    for c in &r.contents {
        match (&c.text, &c.blob) {
            (Some(text), _) => bytes.extend_from_slice(text.as_bytes()),
            (None, Some(blob)) => bytes.extend(BASE64.decode(blob).map_err(|e| {
                format!("{}: the server sent a blob that is not base64 ({e})", c.uri)
            })?),
            (None, None) => {}
        }
    }
    fs::write(path, &bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let mut p = Printout::default();
    if json {
        let report = json!({"uri": r.uri, "server": r.server, "path": path, "bytes": bytes.len()});
        p.line(pretty(&report));
    } else {
        p.line(format!(
            "wrote {} bytes of {} to {}",
            bytes.len(),
            r.uri,
            path.display()
        ));
    }
    Ok(p)
}

/// `evoctl docs [--out FILE] [--json]`: the Markdown reference to the file
/// or stdout; with `--json`, `{"path", "bytes"}` for a file written, else
/// `{"markdown"}`.
pub fn docs(markdown: &str, json: bool, out: Option<&Path>) -> Result<Printout, String> {
    let mut p = Printout::default();
    match out {
        Some(path) => {
            fs::write(path, markdown)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            if json {
                p.line(pretty(&json!({"path": path, "bytes": markdown.len()})));
            }
        }
        None if json => p.line(pretty(&json!({ "markdown": markdown }))),
        None => p.text(markdown),
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::{ReadContent, ResourceLine, StageScores, TemplateLine, ToolLine};

    use super::*;

    fn tool(name: &str, score: Option<f64>) -> ToolLine {
        ToolLine {
            name: name.into(),
            summary: "Echoes text.".into(),
            domain: "fx".into(),
            score,
            ..Default::default()
        }
    }

    #[test]
    fn list_names_the_session_first() {
        let mut hot = tool("fx_time", None);
        hot.hot = true;
        let l = ToolList {
            session: Some("s1".into()),
            session_name: Some("dave".into()),
            tools: vec![tool("fx_echo", None), hot],
        };
        let p = tools(&l);
        assert_eq!(p.stderr(), "");
        assert_eq!(
            p.stdout(),
            "session s1 (dave)\nfx_echo — Echoes text. (fx)\nfx_time — Echoes text. (fx) [hot]\n"
        );
    }

    #[test]
    fn search_shows_stage_scores_only_with_explain() {
        let mut r = SearchResults {
            query: "echo".into(),
            results: vec![tool("fx_echo", Some(1.5))],
            unavailable: vec!["server 'gh' lists no tools".into()],
            ..Default::default()
        };
        assert_eq!(
            search(&r).stdout(),
            "SCORE  TOOL     DOMAIN  SUMMARY\n1.50   fx_echo  fx      Echoes text.\nserver 'gh' lists no tools\n"
        );
        r.results[0].explain = Some(StageScores {
            lexical: 2.0,
            semantic: Some(0.5),
            ..Default::default()
        });
        assert_eq!(
            search(&r).stdout().lines().take(2).collect::<Vec<_>>(),
            [
                "SCORE  LEXICAL  SEMANTIC  FUSED  LEARNED  NEAR-DUP  TOOL     DOMAIN  SUMMARY",
                "1.50   2.00     0.500     -      -        -         fx_echo  fx      Echoes text.",
            ]
        );
        r.results.clear();
        r.unavailable.clear();
        r.reason = Some("the catalog is empty".into());
        assert_eq!(search(&r).stdout(), "no matches: the catalog is empty\n");
    }

    #[test]
    fn resources_list_templates_after_resources() {
        let r = ResourcesReport {
            resources: vec![ResourceLine {
                uri: "file:///a".into(),
                name: "a".into(),
                server: "fx".into(),
                ..Default::default()
            }],
            templates: vec![TemplateLine {
                uri_template: "file:///{p}".into(),
                name: "any".into(),
                server: "fx".into(),
                description: None,
            }],
        };
        assert_eq!(
            resources(&r).stdout(),
            "URI        SERVER  MIME  NAME\nfile:///a  fx      -     a\n\
             \ntemplates (a matching URI is read through their server):\n\
             TEMPLATE     SERVER  NAME\nfile:///{p}  fx      any\n"
        );
        assert_eq!(
            resources(&ResourcesReport::default()).stdout(),
            "no resources: none of the servers evo reaches lists any\n"
        );
    }

    #[test]
    fn read_ends_text_with_a_newline_and_describes_blobs() {
        let r = ReadReport {
            uri: "file:///a".into(),
            server: "fx".into(),
            contents: vec![
                ReadContent {
                    uri: "file:///a".into(),
                    text: Some("hello".into()),
                    ..Default::default()
                },
                ReadContent {
                    uri: "file:///b".into(),
                    mime_type: Some("image/png".into()),
                    blob: Some("AAAA".into()),
                    ..Default::default()
                },
                ReadContent {
                    uri: "file:///c".into(),
                    ..Default::default()
                },
            ],
        };
        assert_eq!(
            read(&r).stdout(),
            "hello\nfile:///b: image/png of 3 bytes (binary); write it to a file with `evoctl read file:///a --out FILE`\nfile:///c: empty\n"
        );
    }

    #[test]
    fn decoded_len_counts_padding() {
        assert_eq!(["", "AA==", "AAA=", "AAAA"].map(decoded_len), [0, 1, 2, 3]);
    }
}
