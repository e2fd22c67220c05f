//! Access: `evoctl token create|list`, `evoctl ui` and `evoctl login`.

use evo_proto::ctl::{LoginReport, TokenCreated, TokenList, UiAddress};

use super::text::{Printout, table};

/// `evoctl token create`: the token alone on stdout (`TOKEN=$(evoctl token
/// create ci)`), what it is on stderr.
pub fn token_created(t: &TokenCreated) -> Printout {
    let mut p = Printout::default();
    p.note(format!(
        "token '{}' created (role {}, profile {}), recorded by its SHA-256 in {}.\nIt is shown this once: give it to the client now (Authorization: Bearer TOKEN).",
        t.name,
        t.role.as_deref().unwrap_or("-"),
        t.profile.as_deref().unwrap_or("-"),
        t.file
    ));
    if let Some(why) = &t.unchecked {
        p.note(format!("warning: {why}"));
    }
    p.line(t.token.clone());
    p
}

/// `evoctl token list`: a table, never a token.
pub fn tokens(l: &TokenList) -> Printout {
    let mut p = Printout::default();
    if l.tokens.is_empty() {
        p.line(format!("no API tokens in {}", l.file));
        return p;
    }
    let rows: Vec<Vec<String>> = l
        .tokens
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.role.clone().unwrap_or_else(|| "-".into()),
                t.profile.clone().unwrap_or_else(|| "-".into()),
                t.created.clone(),
            ]
        })
        .collect();
    p.lines(table(&["NAME", "ROLE", "PROFILE", "CREATED"], &rows));
    p
}

/// `evoctl ui`: the sign-in link on stdout, how long it lasts on stderr.
pub fn ui(u: &UiAddress) -> Printout {
    let mut p = Printout::default();
    p.line(u.url.clone());
    p.note(format!(
        "the link signs one browser in once (unused, it expires in {} min); `evoctl ui` again makes a new one",
        u.expires_s / 60
    ));
    p
}

/// `evoctl login`: the URL to open, when there is one, and what happened.
pub fn login(r: &LoginReport) -> Printout {
    let mut p = Printout::default();
    if let Some(url) = &r.url {
        p.line(url.clone());
    }
    p.line(r.message.clone());
    p
}

#[cfg(test)]
mod tests {
    use evo_proto::ctl::TokenInfo;

    use super::*;

    #[test]
    fn a_new_token_is_alone_on_stdout() {
        let t = TokenCreated {
            name: "ci".into(),
            token: "evo_secret".into(),
            role: Some("reader".into()),
            file: "/c/tokens.json".into(),
            ..Default::default()
        };
        let p = token_created(&t);
        assert_eq!(p.stdout(), "evo_secret\n");
        assert!(
            p.stderr()
                .starts_with("token 'ci' created (role reader, profile -), recorded by its SHA-256 in /c/tokens.json.\n")
        );
    }

    #[test]
    fn tokens_are_a_table_of_names() {
        let l = TokenList {
            tokens: vec![TokenInfo {
                name: "ci".into(),
                role: None,
                profile: Some("coding".into()),
                created: "2026-01-01T00:00:00Z".into(),
            }],
            file: "/c/tokens.json".into(),
        };
        assert_eq!(
            tokens(&l).stdout(),
            "NAME  ROLE  PROFILE  CREATED\nci    -     coding   2026-01-01T00:00:00Z\n"
        );
        assert_eq!(
            tokens(&TokenList::default()).stdout(),
            "no API tokens in \n"
        );
    }

    #[test]
    fn ui_prints_the_link_and_says_how_long_it_lasts() {
        let u = UiAddress {
            url: "http://127.0.0.1:1/ui/login?token=t".into(),
            expires_s: 600,
            ..Default::default()
        };
        let p = ui(&u);
        assert_eq!(p.stdout(), "http://127.0.0.1:1/ui/login?token=t\n");
        assert!(p.stderr().contains("it expires in 10 min"));
    }
}
