//! Tool integrity: `evoctl diff`, and `evoctl status`'s lines about tools
//! whose definition changed since pinned.

use evo_proto::ctl::{DiffReport, IntegrityMode, StatusReport};

use super::text::Printout;

/// `evoctl diff`: per changed tool, what changed and the unified diff.
pub fn diff(d: &DiffReport) -> Printout {
    let mut p = Printout::default();
    for t in &d.tools {
        p.line(format!(
            "{} {} ({}): changed {}; drift {}",
            d.server,
            t.tool,
            t.name,
            t.changed.join(", "),
            t.drift
        ));
        p.text(t.diff.clone());
        p.line("");
    }
    p.line(d.message.clone());
    p
}

/// `evoctl status`'s lines about tools whose definition changed since
/// pinned: held (`integrity: pin`) or only shown (`warn`), with what to run.
pub fn integrity_lines(s: &StatusReport) -> Vec<String> {
    if s.quarantined.is_empty() {
        return Vec::new();
    }
    let head = match s.integrity {
        IntegrityMode::Pin => {
            "quarantined tools (definition changed since pinned; hidden, calls refused):"
        }
        _ => "tools whose definition changed since pinned (integrity: warn; still usable):",
    };
    let mut lines = vec![String::new(), head.to_string()];
    for q in &s.quarantined {
        lines.push(format!(
            "  {} {} ({}): changed {}; drift {}",
            q.server,
            q.tool,
            q.name,
            q.changed.join(", "),
            q.drift
        ));
    }
    lines.push(
        "`evoctl diff SERVER TOOL` shows a change; `evoctl trust SERVER TOOL` accepts it".into(),
    );
    lines
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::{QuarantinedTool, ToolDiff};

    use super::*;

    #[test]
    fn diff_prints_each_tool_then_the_message() {
        let d = DiffReport {
            server: "fx".into(),
            tools: vec![ToolDiff {
                tool: "echo".into(),
                name: "fx_echo".into(),
                changed: vec!["description".into()],
                drift: 1,
                diff: "-a\n+b\n".into(),
                ..Default::default()
            }],
            message: "1 tool changed".into(),
        };
        assert_eq!(
            diff(&d).stdout(),
            "fx echo (fx_echo): changed description; drift 1\n-a\n+b\n\n1 tool changed\n"
        );
    }

    #[test]
    fn integrity_lines_say_whether_tools_are_held() {
        let mut s = StatusReport::default();
        assert!(integrity_lines(&s).is_empty());
        s.quarantined.push(QuarantinedTool {
            server: "fx".into(),
            tool: "echo".into(),
            name: "fx_echo".into(),
            changed: vec!["description".into(), "inputSchema".into()],
            drift: 2,
        });
        let held = integrity_lines(&s);
        assert_eq!(
            held[1..3],
            [
                "quarantined tools (definition changed since pinned; hidden, calls refused):",
                "  fx echo (fx_echo): changed description, inputSchema; drift 2",
            ]
        );
        s.integrity = IntegrityMode::Warn;
        assert!(integrity_lines(&s)[1].contains("integrity: warn; still usable"));
    }
}
