//! The refresh's single flight across runs of one server, without an
//! authorization server: the other run is played by the test.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::*;

/// Writes server `srv`'s token file (for `url`): access token `token`,
/// received at `received_at` (unix seconds), living a minute.
fn write_tokens(dir: &std::path::Path, url: &str, token: &str, received_at: u64) {
    let file: store::TokenFile = serde_json::from_value(json!({
        "binding": binding(url, None),
        "client_id": "evo",
        "credentials": {
            "client_id": "evo",
            "token_response": {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": 60,
                "refresh_token": "spent-once-only",
            },
            "token_received_at": received_at,
        },
    }))
    .expect("a token file");
    store::TEST_DIR.with(|d| *d.borrow_mut() = Some(dir.to_path_buf()));
    store::save("srv", &file).expect("token file written");
}

fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("evo-oauth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test]
async fn a_run_that_waited_for_another_runs_refresh_takes_its_token() {
    let dir = test_dir("single-flight");
    // Nothing listens there: a refresh of this run's own would fail.
    let url = "http://127.0.0.1:9/mcp";
    write_tokens(&dir, url, "old", now_secs() - 3600);
    let bearer = Bearer::load("srv", url, None, |_| {}).expect("stored tokens");
    // Another run of `srv` is refreshing: it holds the server's lock.
    let other_run = store::refresh_lock("srv");
    let refreshing = other_run.lock().await;
    let waiting = tokio::spawn({
        let bearer = bearer.clone();
        async move { bearer.header().await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "this run spent the refresh token while another run was spending it"
    );
    // The other run stores what it got, and lets go.
    write_tokens(&dir, url, "new", now_secs());
    drop(refreshing);
    let header = waiting.await.expect("the request ran");
    assert_eq!(
        header.as_ref().map(|h| h.to_str().unwrap_or_default()),
        Ok("Bearer new"),
        "{header:?}"
    );
    assert!(matches!(bearer.state(), AuthState::Ok { .. }));
    let _ = std::fs::remove_dir_all(&dir);
}
