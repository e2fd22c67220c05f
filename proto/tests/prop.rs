//! Property tests of everything that reads bytes from the control socket:
//! the handshake, line framing and the ctl request parser never panic, never
//! read past their limit, and round-trip what they should.

use evo_proto::frame::{FrameError, read_line};
use evo_proto::{CtlRequest, Hello};
use proptest::prelude::*;
use tokio::io::BufReader;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn handshake_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = Hello::parse(&bytes);
    }

    #[test]
    fn ctl_parser_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = CtlRequest::parse(&bytes);
    }

    #[test]
    fn ctl_parser_never_panics_on_json_shaped_input(
        cmd in "[a-z_]{0,12}",
        key in "[a-z_]{0,8}",
        val in prop_oneof![Just("null".to_string()), Just("1".to_string()), Just("\"x\"".to_string()), Just("[\"a\"]".to_string()), Just("{}".to_string())],
    ) {
        let line = format!("{{\"cmd\":\"{cmd}\",\"{key}\":{val}}}");
        let _ = CtlRequest::parse(line.as_bytes());
    }

    #[test]
    fn hello_round_trips(mode in proptest::option::of("[a-z]{1,10}"), session in proptest::option::of("\\PC{1,40}")) {
        let h = Hello::mcp(mode, session);
        let line = serde_json::to_vec(&h).unwrap();
        prop_assert_eq!(Hello::parse(&line).unwrap(), h);
    }

    /// Lines come back as written, split at any buffer size, and a line over
    /// the limit is an error, never a longer line.
    #[test]
    fn framing_respects_lines_and_limits(
        lines in proptest::collection::vec(proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..64), 0..8),
        capacity in 1usize..32,
        limit in 1usize..80,
    ) {
        let mut input = Vec::new();
        for l in &lines {
            input.extend_from_slice(l);
            input.push(b'\n');
        }
        runtime().block_on(async {
            let mut r = BufReader::with_capacity(capacity, &input[..]);
            for l in &lines {
                let mut want = l.clone();
                if want.last() == Some(&b'\r') {
                    want.pop();
                }
                match read_line(&mut r, limit).await {
                    Ok(Some(got)) => {
                        prop_assert!(l.len() <= limit);
                        prop_assert_eq!(got, want);
                    }
                    Err(FrameError::TooLong { .. }) => {
                        prop_assert!(l.len() > limit);
                        return Ok(());
                    }
                    other => prop_assert!(false, "unexpected {:?}", other.map(|o| o.map(|v| v.len()))),
                }
            }
            prop_assert!(matches!(read_line(&mut r, limit).await, Ok(None)));
            Ok(())
        })?;
    }
}
