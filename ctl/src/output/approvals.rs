//! `evoctl approvals`: calls held for a person's approval.

use evo_proto::ctl::ApprovalsReport;

use super::text::{Printout, age, table};

/// Widest ARGUMENTS cell in `evoctl approvals`: with the other columns it
/// keeps a row within a 100-column terminal; `--json` has the daemon's text.
const ARGUMENTS_WIDTH: usize = 60;

/// `evoctl approvals`: a table of held calls, then how to decide them.
pub fn approvals(r: &ApprovalsReport) -> Printout {
    let mut p = Printout::default();
    if r.approvals.is_empty() {
        p.line("no calls waiting for approval");
        return p;
    }
    let rows: Vec<Vec<String>> = r
        .approvals
        .iter()
        .map(|a| {
            vec![
                a.id.clone(),
                a.tool.clone(),
                a.identity.clone().unwrap_or_else(|| "local".into()),
                age(a.age_s),
                shorten(&a.arguments, ARGUMENTS_WIDTH),
            ]
        })
        .collect();
    p.lines(table(
        &["ID", "TOOL", "IDENTITY", "AGE", "ARGUMENTS"],
        &rows,
    ));
    p.line("\nevoctl approve ID lets the identical call pass once; evoctl deny ID refuses it.");
    p
}

/// `text` on one line and at most `max` characters, ending in "…" when cut.
fn shorten(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::PendingApproval;

    use super::*;

    #[test]
    fn shorten_keeps_short_text_and_cuts_long_text_to_width() {
        assert_eq!(shorten(r#"{"text":"hi"}"#, 60), r#"{"text":"hi"}"#);
        assert_eq!(shorten("abcdefgh", 5), "abcd…");
        assert_eq!(shorten("ééééé", 5), "ééééé");
        assert_eq!(shorten("a\nb\tc", 60), "a b c");
        assert_eq!(shorten(&"x".repeat(500), 60).chars().count(), 60);
    }

    #[test]
    fn approvals_show_a_table_and_what_to_run() {
        let r = ApprovalsReport {
            approvals: vec![PendingApproval {
                id: "ap1".into(),
                tool: "fx_echo".into(),
                arguments: r#"{"text":"hi"}"#.into(),
                age_s: 3,
                identity: None,
            }],
        };
        assert_eq!(
            approvals(&r).stdout(),
            "ID   TOOL     IDENTITY  AGE  ARGUMENTS\n\
             ap1  fx_echo  local     3s   {\"text\":\"hi\"}\n\
             \nevoctl approve ID lets the identical call pass once; evoctl deny ID refuses it.\n"
        );
        assert_eq!(
            approvals(&ApprovalsReport::default()).stdout(),
            "no calls waiting for approval\n"
        );
    }
}
