use rmcp::model::Tool;
use serde_json::json;

use super::index::one_edit;
use super::text::{rewrite_phrases, shape_words, spans, tokenize};
use super::*;

/// A snapshot of servers given as (id, [(tool, description)]).
pub(super) fn snapshot(servers: &[(&str, &[(&str, &str)])]) -> Snapshot {
    let servers: Vec<(String, Vec<Tool>)> = servers
        .iter()
        .map(|(id, tools)| {
            let tools = tools
                .iter()
                .map(|(name, description)| {
                    let tool = json!({
                        "name": name,
                        "description": description,
                        "inputSchema": {"type": "object"},
                    });
                    serde_json::from_value(tool).unwrap()
                })
                .collect();
            (id.to_string(), tools)
        })
        .collect();
    Snapshot::of_tools(&servers)
}

/// A word shared with a far better match does not make a hit (and so
/// is not activated by discover_tools).
#[test]
fn matches_far_below_the_best_are_left_out() {
    let snapshot = snapshot(&[
        (
            "time",
            &[("convert_time", "Convert a time between timezones.")],
        ),
        (
            "wiki",
            &[("translate_pages", "Translate wiki pages between languages.")],
        ),
    ]);
    let outcome = search(
        &Index::of(&snapshot),
        &snapshot,
        "convert a time between timezones",
        5,
        None,
    );
    let names: Vec<&str> = outcome.hits.iter().map(|h| h.entry.name.as_str()).collect();
    assert_eq!(names, ["time_convert_time"], "{:?}", scores(&outcome));
}

fn scores(outcome: &Outcome) -> Vec<(String, f32)> {
    outcome
        .hits
        .iter()
        .map(|h| (h.entry.name.clone(), h.score))
        .collect()
}

fn catalog() -> Snapshot {
    snapshot(&[
        (
            "github",
            &[
                ("list_issues", "List issues in a GitHub repository."),
                (
                    "create_pull_request",
                    "Create a new pull request in a GitHub repository.",
                ),
                ("add_issue_comment", "Add a comment to an existing issue."),
            ],
        ),
        (
            "gitlab",
            &[(
                "create_merge_request",
                "Create a new merge request in a GitLab project.",
            )],
        ),
        (
            "discord",
            &[
                ("discord_send", "Sends a message to a Discord channel."),
                (
                    "discord_delete_message",
                    "Deletes a message from a Discord channel.",
                ),
            ],
        ),
        (
            "calendar",
            &[
                ("list-events", "List the events of a calendar."),
                ("create-event", "Create a new calendar event."),
            ],
        ),
        (
            "todoist",
            &[
                ("close_tasks", "Close tasks in Todoist."),
                ("reopen_tasks", "Reopen tasks in Todoist."),
            ],
        ),
    ])
}

fn top(snapshot: &Snapshot, query: &str) -> String {
    let outcome = search(&Index::of(snapshot), snapshot, query, 5, None);
    outcome
        .hits
        .first()
        .map(|h| h.entry.name.clone())
        .unwrap_or_default()
}

/// The top result's doubles on other servers all follow it, one per
/// server (the closest), and a double on its own server is not one.
#[test]
fn near_duplicates_of_several_servers_follow_the_top_result() {
    let snap = snapshot(&[
        (
            "slack",
            &[
                ("send_message", "Send a message to a channel."),
                ("send_file", "Send a file."),
            ],
        ),
        (
            "discord",
            &[
                ("send", "Send a message."),
                ("send_dm", "Send a direct message."),
            ],
        ),
        ("teams", &[("send_chat", "Send a chat message.")]),
        ("mail", &[("archive_thread", "Archive an email thread.")]),
    ]);
    let v = |a: f32, b: f32| -> [f32; 3] {
        let n = (a * a + b * b).sqrt();
        [a / n, b / n, 0.0]
    };
    // Rows in the snapshot's order; similarity to slack_send_message:
    // slack_send_file 0.95 (same server), discord_send 0.99,
    // discord_send_dm 0.8, teams_send_chat 0.7, mail 0.
    let mut rows: Vec<[f32; 3]> = Vec::new();
    for e in &snap.tools {
        rows.push(match e.name.as_str() {
            "slack_send_message" => v(1.0, 0.0),
            "slack_send_file" => v(0.95, 0.312),
            "discord_send" => v(0.99, 0.141),
            "discord_send_dm" => v(0.8, 0.6),
            "teams_send_chat" => v(0.7, 0.714),
            _ => [0.0, 0.0, 1.0],
        });
    }
    let docs = semantic::DocVectors {
        version: snap.version,
        dim: 3,
        data: rows.concat(),
    };
    let query = [1.0f32, 0.0, 0.0];
    let outcome = search_with(
        &Index::of(&snap),
        &snap,
        "send a message to the channel",
        5,
        None,
        &Stages::all(Semantic {
            docs: &docs,
            query: &query,
        }),
    );
    let got: Vec<(&str, Option<&str>)> = outcome
        .hits
        .iter()
        .map(|h| {
            (
                h.entry.name.as_str(),
                h.stages.pulled_by.as_ref().map(|p| p.0.as_str()),
            )
        })
        .collect();
    assert_eq!(got[0].0, "slack_send_message", "{got:?}");
    assert_eq!(
        got[1],
        ("discord_send", Some("slack_send_message")),
        "{got:?}"
    );
    assert_eq!(
        got[2],
        ("teams_send_chat", Some("slack_send_message")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .all(|g| g.1.is_none() || !g.0.starts_with("slack_")),
        "{got:?}"
    );
    assert!(
        !got.contains(&("discord_send_dm", Some("slack_send_message"))),
        "one double per server: {got:?}"
    );
}

/// Fusion and near-duplicates on vectors made by hand: a tool no word
/// matches is found by its vector, and the other server's copy of the
/// best match comes right after it, whatever its own scores.
#[test]
fn semantic_stages_fuse_and_pull_near_duplicates() {
    let snap = snapshot(&[
        (
            "slack",
            &[
                ("send_message", "Send a message to a channel."),
                ("list_channels", "List the channels."),
            ],
        ),
        ("chat", &[("post_note", "Post a note to a room.")]),
        ("mail", &[("archive_thread", "Archive an email thread.")]),
    ]);
    let dim = 3;
    // mail_archive_thread shares no word with the query, but its vector
    // is the query's nearest.
    let rows: [[f32; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.0, 1.0, 0.0],
        [0.96, 0.28, 0.0],
        [0.95, 0.0, 0.31],
    ];
    let docs = semantic::DocVectors {
        version: snap.version,
        dim,
        data: rows.concat(),
    };
    let query = [1.0f32, 0.0, 0.3];
    let names = |stages: &Stages<'_>| -> Vec<String> {
        search_with(&Index::of(&snap), &snap, "send a message", 5, None, stages)
            .hits
            .iter()
            .map(|h| h.entry.name.clone())
            .collect()
    };
    let sem = Semantic {
        docs: &docs,
        query: &query,
    };
    let archive = "mail_archive_thread".to_string();
    let got = names(&Stages::LEXICAL);
    assert_eq!(got[0], "slack_send_message", "{got:?}");
    assert!(!got.contains(&archive), "{got:?}");
    let mut fused = Stages::all(sem);
    fused.near_duplicates = false;
    let got = names(&fused);
    assert_eq!(got[0], "slack_send_message", "{got:?}");
    assert!(got.contains(&archive), "{got:?}");
    // A tool of another server whose vector is all but the same, and
    // whose name names the same action, is pulled next to the best.
    let snap2 = snapshot(&[
        ("slack", &[("send_message", "Send a message to a channel.")]),
        ("mail", &[("archive_thread", "Archive an email thread.")]),
        ("chat", &[("send_note", "Send a note to a room.")]),
    ]);
    let docs2 = semantic::DocVectors {
        version: snap2.version,
        dim,
        data: [[1.0f32, 0.0, 0.0], [0.0, 0.6, 0.8], [0.96, 0.28, 0.0]].concat(),
    };
    let query2 = [0.6f32, 0.0, 0.8];
    let outcome = search_with(
        &Index::of(&snap2),
        &snap2,
        "send a message",
        5,
        None,
        &Stages::all(Semantic {
            docs: &docs2,
            query: &query2,
        }),
    );
    let got: Vec<(&str, Option<&str>)> = outcome
        .hits
        .iter()
        .map(|h| {
            (
                h.entry.name.as_str(),
                h.stages.pulled_by.as_ref().map(|p| p.0.as_str()),
            )
        })
        .collect();
    assert_eq!(got[0], ("slack_send_message", None), "{got:?}");
    assert_eq!(
        got[1],
        ("chat_send_note", Some("slack_send_message")),
        "{got:?}"
    );
    let scores: Vec<f32> = outcome.hits.iter().map(|h| h.score).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
}

#[test]
fn token_shapes_say_what_they_are() {
    for (query, want) in [
        ("what happened in #incidents", &["channel"][..]),
        ("Text +1 415 555 0134 that it shipped", &["phone"]),
        ("call 415-555-0134 now", &["phone"]),
        ("list the classes in models.py", &["file"]),
        ("every page on docs.example.com", &["website"]),
        ("17.5% of 2340 + 12 = ?", &["calculate"]),
        ("tag release v2.3.0", &[]),
        ("latest Next.js docs, e.g. routing", &[]),
        ("2 + 2", &["calculate"]),
        ("is https://example.com/a up", &["url", "link"]),
        ("every .env file under ~/code", &["file", "path"]),
        ("react with 🎉 and :thumbsup:", &["emoji"]),
        ("a/b testing and/or 3/4", &[]),
        ("top 10 issues in 2024", &[]),
    ] {
        assert_eq!(shape_words(query), want, "{query}");
    }
}

#[test]
fn quoted_values_and_negated_clauses_are_marked() {
    let marked = |q| -> Vec<(String, bool)> {
        spans(q)
            .into_iter()
            .map(|(s, v)| {
                (
                    s.trim_matches(|c: char| " '\"`,".contains(c)).to_string(),
                    v,
                )
            })
            .filter(|(s, _)| !s.is_empty())
            .collect()
    };
    let own = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(s, b)| (s.to_string(), *b)).collect()
    };
    assert_eq!(
        marked("find my note 'k8s cheatsheet' in the vault"),
        own(&[
            ("find my note", false),
            ("k8s cheatsheet", true),
            ("in the vault", false)
        ])
    );
    assert_eq!(
        marked("I don't want them deleted, just archived"),
        own(&[
            ("I don't", false),
            ("want them deleted", true),
            ("just archived", false)
        ])
    );
    assert_eq!(
        marked("change \"colour\" to `color` without rewriting the file"),
        own(&[
            ("change", false),
            ("colour", true),
            ("to", false),
            ("color", true),
            ("without", false),
            ("rewriting the file", true)
        ])
    );
    // Apostrophes inside words and "never mind" are no quote or negation.
    assert_eq!(
        marked("Marco's job title"),
        own(&[("Marco's job title", false)])
    );
    assert_eq!(
        marked("never mind the email, don't send it"),
        own(&[("never mind the email, don't", false), ("send it", true)])
    );
    // A quoted tool name is what is asked for.
    assert_eq!(
        marked("run `git_status` on 'README draft'"),
        own(&[("run `git_status` on", false), ("README draft", true)])
    );
    // An unclosed quote runs to the end; nothing panics on odd input.
    assert_eq!(
        marked("search 'open"),
        own(&[("search", false), ("open", true)])
    );
    for q in ["'", "\"", "not", "’’", "don't", "🎉'x'", "a'b'c"] {
        assert_eq!(spans(q).iter().map(|s| s.0).collect::<String>(), q);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

    /// Any text, the quoting and punctuation of chat included: spans
    /// cover the query exactly, and search answers without panicking.
    #[test]
    fn any_query_is_cut_and_searched(
        query in "[ a-zA-Z0-9'\"`‘’“”,.;:!?#@~/+%()🎉-]{0,60}|\\PC{0,40}"
    ) {
        let cut: String = spans(&query).iter().map(|s| s.0).collect();
        proptest::prop_assert_eq!(&cut, &query);
        let snapshot = catalog();
        let outcome = search(&Index::of(&snapshot), &snapshot, &query, 5, None);
        proptest::prop_assert!(outcome.hits.len() <= 5);
        proptest::prop_assert!(!outcome.hits.is_empty() || outcome.reason.is_some());
    }
}

#[test]
fn a_value_does_not_decide_the_tool() {
    let snapshot = snapshot(&[
        (
            "notes",
            &[
                ("search_notes", "Search notes by name."),
                ("delete_note", "Delete a note."),
            ],
        ),
        ("kube", &[("delete_pod", "Delete a kubernetes pod.")]),
    ]);
    assert_eq!(
        top(&snapshot, "find my note 'delete pod checklist'"),
        "notes_search_notes"
    );
    assert_eq!(
        top(&snapshot, "I don't want the note deleted, search it"),
        "notes_search_notes"
    );
}

#[test]
fn tokenizer_splits_cases_and_stems() {
    assert_eq!(tokenize("get_current_time"), vec!["get", "current", "time"]);
    assert_eq!(
        tokenize("listPullRequests"),
        vec!["list", "pull", "request"]
    );
    assert_eq!(tokenize("getURLInfo"), vec!["get", "url", "info"]);
    // A product name is also kept whole.
    assert_eq!(tokenize("on GitHub"), vec!["git", "hub", "github"]);
    assert_eq!(
        tokenize("s3 bucket, oauth2 v2010"),
        vec!["s3", "bucket", "oauth"]
    );
    assert_eq!(
        tokenize("files, indexes and running"),
        vec!["file", "index", "run"]
    );
    assert!(tokenize("  ").is_empty());
}

#[test]
fn porter_stems_meet() {
    for (words, stem) in [
        (&["delete", "deleted", "deleting", "deletes"][..], "delet"),
        (&["queue", "queued", "queues"], "queu"),
        (&["repository", "repositories"], "repositori"),
        (&["review", "reviews", "reviewer"], "review"),
        (&["pr", "s3"], ""),
    ] {
        for w in words {
            let expected = if stem.is_empty() { w } else { stem };
            assert_eq!(porter::stem(w), expected, "{w}");
        }
    }
}

#[test]
fn phrases_read_as_their_word() {
    assert_eq!(rewrite_phrases("get rid of the junk"), "delete the junk ");
    assert_eq!(rewrite_phrases("bring it back!"), "restore ");
    assert_eq!(rewrite_phrases("bring the car back"), "bring the car back ");
}

#[test]
fn one_edit_covers_typos() {
    for (a, b) in [
        ("calender", "calendar"),
        ("renmae", "rename"),
        ("arows", "arrows"),
    ] {
        assert!(one_edit(a.as_bytes(), b.as_bytes()), "{a} {b}");
    }
    assert!(!one_edit(b"calendar", b"colander"));
}

#[test]
fn ranks_what_the_query_asks_for() {
    let snap = catalog();
    for (query, expected) in [
        ("github_list_issues", "github_list_issues"),
        ("open a PR on GitHub", "github_create_pull_request"),
        (
            "some bot spammed #general on discord, nuke that msg",
            "discord_delete_message",
        ),
        ("put a meeting in my calender", "calendar_create-event"),
        (
            "that todo in todoist: bring it back",
            "todoist_reopen_tasks",
        ),
        (
            "reply on the issue that it's fixed",
            "github_add_issue_comment",
        ),
        // A tool name inside a query, quoted or not, in any case style.
        ("`create_pull_request`", "github_create_pull_request"),
        ("\"list_issues\"", "github_list_issues"),
        (
            "call 'discord_delete_message' please",
            "discord_delete_message",
        ),
        ("‘reopenTasks’", "todoist_reopen_tasks"),
        ("list the fields of `create_event`", "calendar_create-event"),
        ("list what \"createEvent\" takes", "calendar_create-event"),
    ] {
        assert_eq!(top(&snap, query), expected, "{query}");
    }
}

#[test]
fn says_why_nothing_matched() {
    let snap = catalog();
    let long = "word ".repeat(MAX_QUERY_BYTES);
    for (query, domain) in [
        ("  ", None),
        (long.as_str(), None),
        ("issues", Some("nope")),
    ] {
        let outcome = search(&Index::of(&snap), &snap, query, 5, domain);
        assert!(
            outcome.hits.is_empty() && outcome.reason.is_some(),
            "{query:.20}"
        );
    }
    assert!(
        search(&Index::of(&snap), &snap, "zzzz qqqq", 5, None)
            .reason
            .is_some()
    );
    assert_eq!(
        search(&Index::of(&snap), &snap, "issues", 5, Some("github"))
            .hits
            .len(),
        2
    );
}
