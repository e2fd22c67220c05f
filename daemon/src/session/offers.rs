//! A session's resources, templates, prompts and completions: lists from
//! the snapshot (paginated towards the client), reads, gets and completions
//! routed to the owning child (started if idle), and subscriptions held per
//! session at the owning server's [`Subscriptions`](crate::child::subscriptions).
//!
//! A URI no server lists and no template matches is `-32002` naming `evoctl resources`. Lists are
//! paginated towards clients in pages of 500; the cursor is an offset evo gave out, and any other
//! is invalid params. With no child offering resources, prompts or completions, those methods
//! answer `-32601` saying none of the servers offers them; while a configured server has not
//! said what it offers (it is starting with nothing cached), they answer what is known so far. Results of initialize-era children get
//! `resultType: complete` for 2026-07-28 clients.
//!
//! A session answers lists from the snapshot and routes `resources/read`, `prompts/get` and
//! `completion/complete` to the owning server's peer (`ServerLink::peer` starts an idle child),
//! with the server's timeout; a child's own MCP error passes through, anything else names the
//! server. Sessions compare the offers' fingerprints on every snapshot and send
//! `resources/list_changed` / `prompts/list_changed` when theirs moved.

use std::sync::Arc;
use std::time::Duration;

use rmcp::ErrorData;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, GetPromptRequestParams, GetPromptResponse,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
};
use rmcp::service::{Peer, RoleClient};

use super::SessionServer;
use super::transport::RawAnswer;
#[cfg(doc)]
use super::transport::RawAnswers;
use crate::catalog::resources::OfferCaps;
use crate::catalog::resources::Offers;
use crate::child::direct::{Direct, RawResult};
use crate::child::link::ServerLink;
use crate::child::subscriptions::Listener;
use crate::error_text;

/// Items per page of a resources, templates or prompts list.
pub const PAGE: usize = 500;

/// One page of `items` from `cursor` (an offset evo gave out).
pub fn page<'a, T>(
    items: &'a [T],
    request: Option<&PaginatedRequestParams>,
) -> Result<(&'a [T], Option<String>), ErrorData> {
    let start = match request.and_then(|r| r.cursor.as_deref()) {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= items.len())
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    format!("cursor '{c}' is not one evo gave out; list again from the start"),
                    None,
                )
            })?,
    };
    let end = (start + PAGE).min(items.len());
    let next = (end < items.len()).then(|| end.to_string());
    Ok((&items[start..end], next))
}

/// The error for a request to a server that cannot take it now (down,
/// failed, gone): names the server and its state.
fn unavailable(server: &ServerLink, why: String) -> ErrorData {
    ErrorData::internal_error(why, Some(serde_json::json!({"server": server.id})))
}

/// What a child's failure becomes: its own MCP error as it sent it, or one
/// that names the server and what went wrong.
fn failed(server: &ServerLink, method: &str, e: rmcp::ServiceError) -> ErrorData {
    match e {
        rmcp::ServiceError::McpError(e) => e,
        other => ErrorData::internal_error(
            format!(
                "server '{}' failed {method}: {}; `evoctl status` shows its state",
                server.id,
                error_text::readable_error(&other)
            ),
            Some(serde_json::json!({"server": server.id})),
        ),
    }
}

/// A `resources/read` answer as a child sent it: the resource, or (on
/// 2026-07-28) a request for more input, passed on as such.
fn read_response(raw: &RawResult) -> Result<ReadResourceResponse, rmcp::ServiceError> {
    let shape = read_shape(raw)?;
    let parsed = if shape.result_type.as_deref() == Some("input_required") {
        raw.parse::<rmcp::model::InputRequiredResult>("resource answer")
            .map(Into::into)
    } else {
        raw.parse::<ReadResourceResult>("resource").map(Into::into)
    };
    parsed.map_err(rmcp::ServiceError::McpError)
}

/// What a `resources/read` answer must be, checked without building its
/// contents: each item has a string `uri` and a string `text` or `blob`.
#[derive(serde::Deserialize)]
struct ReadShape<'a> {
    #[serde(borrow, rename = "resultType")]
    result_type: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    contents: Vec<ContentShape>,
}

#[derive(serde::Deserialize)]
struct ContentShape {
    #[allow(dead_code)] // checked to be a string, not used
    uri: IsString,
    text: Option<IsString>,
    blob: Option<IsString>,
}

/// A JSON string, checked and not kept (unescaped into serde's scratch
/// buffer, never allocated).
struct IsString;

impl<'de> serde::Deserialize<'de> for IsString {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = IsString;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<IsString, E> {
                Ok(IsString)
            }
        }
        d.deserialize_str(Visitor)
    }
}

fn read_shape(raw: &RawResult) -> Result<ReadShape<'_>, rmcp::ServiceError> {
    let bad = |why: String| {
        rmcp::ServiceError::McpError(ErrorData::internal_error(
            format!("the answer is not a resource: {why}"),
            None,
        ))
    };
    // An object, not an array serde would also read into the struct: the
    // socket writes its members out behind a head of its own.
    if raw.bytes().first() != Some(&b'{') {
        return Err(bad("the result is not a JSON object".into()));
    }
    let shape: ReadShape = serde_json::from_slice(raw.bytes()).map_err(|e| bad(e.to_string()))?;
    if shape.result_type.as_deref() != Some("input_required")
        && let Some(i) = shape
            .contents
            .iter()
            .position(|c| c.text.is_none() == c.blob.is_none())
    {
        return Err(bad(format!(
            "contents[{i}] has neither or both of text and blob"
        )));
    }
    Ok(shape)
}

/// How a read's answer goes out on the socket.
enum ReadOut {
    /// As the child wrote it (see [`RawAnswers`]).
    Raw(RawAnswer),
    /// Parsed: a 2026-07-28 child asking for input first.
    Parsed(ReadResourceResponse),
}

/// The answer for the socket, its `resultType` completed as [`complete`]
/// does for parsed ones.
fn socket_read(raw: RawResult) -> Result<ReadOut, rmcp::ServiceError> {
    let has_type = match read_shape(&raw)?.result_type.as_deref() {
        Some("input_required") => return read_response(&raw).map(ReadOut::Parsed),
        other => other.is_some(),
    };
    let (body, at) = raw.into_parts();
    // The result is an object: `{`, members, `}`; its members go out as
    // they are, after the head.
    let inner = at.start + 1..at.end - 1;
    let empty = body[inner.clone()].iter().all(u8::is_ascii_whitespace);
    let head = match (has_type, empty) {
        (true, _) => "{",
        (false, true) => r#"{"resultType":"complete""#,
        (false, false) => r#"{"resultType":"complete","#,
    };
    Ok(ReadOut::Raw(RawAnswer {
        head,
        body,
        at: inner,
    }))
}

/// One page of `resources/list` from the merged offers.
pub fn resources_page(
    offers: &Offers,
    request: Option<&PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let (items, next) = page(&offers.resources, request)?;
    let mut result =
        ListResourcesResult::with_all_items(items.iter().map(|r| r.resource.clone()).collect());
    result.next_cursor = next;
    Ok(result)
}

/// One page of `resources/templates/list`.
pub fn templates_page(
    offers: &Offers,
    request: Option<&PaginatedRequestParams>,
) -> Result<ListResourceTemplatesResult, ErrorData> {
    let (items, next) = page(&offers.templates, request)?;
    let mut result = ListResourceTemplatesResult::with_all_items(
        items.iter().map(|t| t.template.clone()).collect(),
    );
    result.next_cursor = next;
    Ok(result)
}

/// One page of `prompts/list`.
pub fn prompts_page(
    offers: &Offers,
    request: Option<&PaginatedRequestParams>,
) -> Result<ListPromptsResult, ErrorData> {
    let (items, next) = page(&offers.prompts, request)?;
    let mut result =
        ListPromptsResult::with_all_items(items.iter().map(|p| p.prompt.clone()).collect());
    result.next_cursor = next;
    Ok(result)
}

/// A child of the initialize era sends results without `resultType`, which
/// 2026-07-28 requires; rmcp takes it off again for initialize-era clients.
pub(super) fn complete(result_type: &mut Option<rmcp::model::ResultType>) {
    if result_type.is_none() {
        *result_type = Some(rmcp::model::ResultType::COMPLETE);
    }
}

/// A request for something no child offers: evo does not advertise it.
fn none_offer(method: &str, what: &str) -> ErrorData {
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!("method '{method}' is not served by evo now: none of its servers offers {what}"),
        None,
    )
}

impl SessionServer {
    /// Refuses `method` unless a child offers `what` (`has`), or may yet
    /// (it has not said what it offers): then the lists answer what is
    /// known so far.
    fn offered(
        &self,
        method: &str,
        what: &str,
        has: impl Fn(&OfferCaps) -> bool,
    ) -> Result<(), ErrorData> {
        if has(&self.catalog().may_offer()) {
            Ok(())
        } else {
            Err(none_offer(method, what))
        }
    }

    pub(super) fn resources_page(
        &self,
        request: Option<&PaginatedRequestParams>,
    ) -> Result<ListResourcesResult, ErrorData> {
        self.offered("resources/list", "resources", |c| c.resources)?;
        resources_page(&self.catalog().offers, request)
    }

    pub(super) fn templates_page(
        &self,
        request: Option<&PaginatedRequestParams>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        self.offered("resources/templates/list", "resources", |c| c.resources)?;
        templates_page(&self.catalog().offers, request)
    }

    pub(super) fn prompts_page(
        &self,
        request: Option<&PaginatedRequestParams>,
    ) -> Result<ListPromptsResult, ErrorData> {
        self.offered("prompts/list", "prompts", |c| c.prompts)?;
        prompts_page(&self.catalog().offers, request)
    }

    /// The server that owns `uri`, or an error saying none does.
    fn owner(&self, uri: &str) -> Result<Arc<ServerLink>, ErrorData> {
        let snapshot = self.catalog();
        snapshot.offers.owner_of(uri).cloned().ok_or_else(|| {
            if let Some(why) = snapshot.offers.refusal_for_uri(uri) {
                return ErrorData::invalid_request(
                    why.to_owned(),
                    Some(serde_json::json!({"uri": uri, "quarantined": true})),
                );
            }
            ErrorData::resource_not_found(
                format!(
                    "no server evo reaches lists the resource '{uri}' or a template matching it; `evoctl resources` lists them"
                ),
                Some(serde_json::json!({"uri": uri})),
            )
        })
    }

    /// The child's peer (starting it if idle), with the server's timeout.
    async fn reach(&self, server: &ServerLink) -> Result<Arc<Peer<RoleClient>>, ErrorData> {
        server.peer().await.map_err(|why| unavailable(server, why))
    }

    async fn timed<T>(
        server: &ServerLink,
        method: &str,
        call: impl Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T, ErrorData> {
        let limit: Duration = server.timeout();
        match tokio::time::timeout(limit, call).await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(failed(server, method, e)),
            Err(_) => Err(ErrorData::internal_error(
                format!(
                    "server '{}' did not answer {method} within {} s (its timeout_s)",
                    server.id,
                    limit.as_secs()
                ),
                Some(serde_json::json!({"server": server.id})),
            )),
        }
    }

    pub(super) async fn read(
        &self,
        request: ReadResourceRequestParams,
        id: rmcp::model::RequestId,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let server = self.owner(&request.uri)?;
        let _busy = server.begin_call();
        let peer = self.reach(&server).await?;
        if let Some(direct) = server.direct() {
            // Straight onto a stdio child's stdin, as tool calls go; on the
            // socket the answer goes back out unparsed (checked for shape),
            // elsewhere it is parsed once, into its result type.
            let read = async {
                let params = serde_json::json!({"uri": request.uri});
                let pending = direct
                    .request("resources/read", params)
                    .await
                    .map_err(|_| rmcp::ServiceError::TransportClosed)?;
                match pending.answer_raw().await {
                    Direct::Result(raw, _) => match &self.raw {
                        Some(filed) => match socket_read(raw)? {
                            ReadOut::Raw(answer) => {
                                filed.file(id, answer);
                                // What goes out in its place.
                                Ok(ReadResourceResult::new(Vec::new()).into())
                            }
                            ReadOut::Parsed(response) => Ok(response),
                        },
                        None => read_response(&raw),
                    },
                    Direct::Error(e) => Err(rmcp::ServiceError::McpError(e)),
                    Direct::Gone => Err(rmcp::ServiceError::TransportClosed),
                }
            };
            let mut response = Self::timed(&server, "resources/read", read).await?;
            if let ReadResourceResponse::Complete(r) = &mut response {
                complete(&mut r.result_type);
            }
            return Ok(response);
        }
        let mut request = request;
        request.meta = None;
        let mut response =
            Self::timed(&server, "resources/read", peer.read_resource_once(request)).await?;
        if let ReadResourceResponse::Complete(r) = &mut response {
            complete(&mut r.result_type);
        }
        Ok(response)
    }

    pub(super) async fn prompt(
        &self,
        request: GetPromptRequestParams,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (server, upstream) = {
            let snapshot = self.catalog();
            match snapshot.offers.prompt(&request.name) {
                Some(p) => (p.server.clone(), p.upstream.clone()),
                None => {
                    let offers = &snapshot.offers;
                    let name = &request.name;
                    let why = match (offers.denied.get(name), offers.quarantined.get(name)) {
                        (Some(rule), _) => {
                            format!("prompt '{name}' is denied by permissions ({rule})")
                        }
                        (None, Some(why)) => why.clone(),
                        (None, None) => format!(
                            "no prompt named '{}'; prompts/list (or `evoctl prompts`) lists them",
                            request.name
                        ),
                    };
                    return Err(ErrorData::invalid_params(why, None));
                }
            }
        };
        let _busy = server.begin_call();
        let peer = self.reach(&server).await?;
        let mut request = request;
        request.name = upstream;
        request.meta = None;
        let mut response =
            Self::timed(&server, "prompts/get", peer.get_prompt_once(request)).await?;
        if let GetPromptResponse::Complete(r) = &mut response {
            complete(&mut r.result_type);
        }
        Ok(response)
    }

    pub(super) async fn completion(
        &self,
        request: CompleteRequestParams,
    ) -> Result<CompleteResult, ErrorData> {
        self.offered("completion/complete", "completions", |c| c.completions)?;
        let mut request = request;
        let server = {
            let snapshot = self.catalog();
            match &mut request.r#ref {
                Reference::Prompt(p) => match snapshot.offers.prompt(&p.name) {
                    Some(entry) => {
                        p.name = entry.upstream.clone();
                        entry.server.clone()
                    }
                    None => {
                        let why = match snapshot.offers.quarantined.get(p.name.as_str()) {
                            Some(why) => why.clone(),
                            None => format!("no prompt named '{}' to complete for", p.name),
                        };
                        return Err(ErrorData::invalid_params(why, None));
                    }
                },
                Reference::Resource(r) => snapshot
                    .offers
                    .owner_of_template(&r.uri)
                    .cloned()
                    .ok_or_else(|| {
                        ErrorData::invalid_params(
                            format!("no server lists the resource template '{}'", r.uri),
                            None,
                        )
                    })?,
                _ => {
                    return Err(ErrorData::invalid_params(
                        "completion/complete: evo routes only ref/prompt and ref/resource references",
                        None,
                    ));
                }
            }
        };
        let _busy = server.begin_call();
        let peer = self.reach(&server).await?;
        request.meta = None;
        let mut result =
            Self::timed(&server, "completion/complete", peer.complete(request)).await?;
        complete(&mut result.result_type);
        Ok(result)
    }

    /// `resources/subscribe` (initialize era): the session hears
    /// `notifications/resources/updated` of `uri` from now on.
    pub(super) async fn subscribe_to(
        &self,
        uri: &str,
        listener: Listener,
        key: &str,
    ) -> Result<(), ErrorData> {
        let server = self.owner(uri)?;
        let supports = self
            .snapshot
            .load()
            .offers
            .caps_of(&server.id)
            .is_some_and(|c| c.subscribe);
        if !supports {
            return Err(ErrorData::invalid_params(
                format!(
                    "server '{}' does not support resource subscriptions, so '{uri}' cannot be subscribed to",
                    server.id
                ),
                None,
            ));
        }
        let peer = self.reach(&server).await?;
        server
            .subscriptions
            .subscribe(&peer, uri, key, listener, server.updates())
            .await
            .map_err(|e| failed(&server, "resources/subscribe", e))?;
        self.view.subscribed(key, &server);
        Ok(())
    }

    pub(super) async fn unsubscribe_from(&self, uri: &str, key: &str) -> Result<(), ErrorData> {
        let server = self.owner(uri)?;
        let peer = server.peer().await.ok();
        server
            .subscriptions
            .unsubscribe(peer.as_deref(), uri, key)
            .await;
        Ok(())
    }
}

/// Ends every subscription `key` holds (a session or one of its listen
/// streams that went away).
pub async fn end_subscriptions(key: &str, servers: &[Arc<ServerLink>]) {
    for server in servers {
        let peer = server.peer_if_ready();
        for uri in server.subscriptions.of_session(key) {
            server
                .subscriptions
                .unsubscribe(peer.as_deref(), &uri, key)
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// What the socket would send as the result of `answer`.
    fn sent(answer: &str) -> Value {
        match socket_read(RawResult::whole(answer)) {
            Ok(ReadOut::Raw(raw)) => {
                let mut text = raw.head.as_bytes().to_vec();
                text.extend_from_slice(&raw.body[raw.at.clone()]);
                text.push(b'}');
                serde_json::from_slice(&text).expect("the result sent is JSON")
            }
            Ok(ReadOut::Parsed(_)) => panic!("parsed, not passed through"),
            Err(e) => panic!("refused: {e}"),
        }
    }

    #[test]
    fn a_read_goes_out_as_written_with_its_result_type_completed() {
        let answer = r#"{"contents":[{"uri":"fx://a","mimeType":"text/plain","text":"line\none \"é\" \u00e9"}],"_meta":{"k":1}}"#;
        let mut expected: Value = serde_json::from_str(answer).unwrap();
        expected["resultType"] = json!("complete");
        assert_eq!(sent(answer), expected);
        assert_eq!(sent("{}"), json!({"resultType": "complete"}));
        assert_eq!(sent("{ \n }"), json!({"resultType": "complete"}));
        let typed = r#"{"resultType":"complete","contents":[{"uri":"b","blob":"AAEC"}]}"#;
        assert_eq!(sent(typed), serde_json::from_str::<Value>(typed).unwrap());
    }

    #[test]
    fn a_read_answer_of_the_wrong_shape_is_refused_naming_what_is_wrong() {
        for (answer, says) in [
            (r#"{"contents":[{"uri":"a","text":5}]}"#, "a string"),
            (r#"{"contents":[{"uri":"a"}]}"#, "neither or both"),
            (
                r#"{"contents":[{"uri":"a","text":"t","blob":"b"}]}"#,
                "neither or both",
            ),
            (r#"{"contents":[{"text":"t"}]}"#, "uri"),
            (r#"{"contents":"no"}"#, "sequence"),
            (r#"[null, []]"#, "not a JSON object"),
            (r#""text""#, "not a JSON object"),
        ] {
            match socket_read(RawResult::whole(answer)) {
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains("not a resource") && e.contains(says),
                        "{answer}: {e}"
                    );
                }
                Ok(_) => panic!("{answer} was accepted"),
            }
        }
    }

    #[test]
    fn a_request_for_input_is_parsed_not_passed_through() {
        let answer = r#"{"resultType":"input_required","requestState":"s1"}"#;
        assert!(matches!(
            socket_read(RawResult::whole(answer)),
            Ok(ReadOut::Parsed(ReadResourceResponse::InputRequired(_)))
        ));
    }
}
