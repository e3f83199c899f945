//! Answers scripted from bytes, in the place of the network (feature `fuzzing`, for the fuzz
//! target of the client's handling of answers): while a script is set, every store built
//! sends its requests here instead of to a server, through the same bounding, redirect and
//! counting layer ([`crate::http`]) as real answers. Nothing of it is compiled without the
//! feature.
//!
//! A script is a sequence of answers, each from the bytes: a status (one byte, an index into
//! the statuses a store can give that are not retried), a byte of flags naming the headers it
//! has (`content-length`, `content-range`, `etag`, `last-modified`, `location`,
//! `x-amz-version-id`), each header's value (a length byte, then that many bytes), and the
//! body (a two-byte little-endian length, then that many bytes, or what is left). Requests past
//! the last answer are answered 404.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use object_store::client::{HttpError, HttpRequest, HttpResponse, HttpResponseBody, HttpService};

/// The answers of the script now set, in the order requests take them; `None` when no
/// script is set (requests go to the network).
static SCRIPT: Mutex<Option<VecDeque<Answer>>> = Mutex::new(None);

/// Statuses a store may answer with that the client does not retry (a retried status would
/// make each input wait out the retry policy).
const STATUSES: [u16; 12] = [200, 206, 204, 301, 302, 307, 304, 400, 403, 404, 412, 416];

/// The headers an answer may have, by flag bit.
const HEADERS: [&str; 6] =
    ["content-length", "content-range", "etag", "last-modified", "location", "x-amz-version-id"];

struct Answer {
    status: u16,
    headers: Vec<(&'static str, Vec<u8>)>,
    body: Vec<u8>,
}

/// Held while a script is set: one script at a time in a process (callers on other threads
/// wait), ended when dropped.
static GATE: Mutex<()> = Mutex::new(());

/// A script of answers in force; dropped, requests go to the network again.
#[must_use = "the script ends when this is dropped"]
pub struct Script {
    _gate: std::sync::MutexGuard<'static, ()>,
}

impl Drop for Script {
    fn drop(&mut self) {
        *SCRIPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Script")
    }
}

/// Sets the script of answers `bytes` describe (see the module), in the place of the
/// network, for every request until the returned [`Script`] is dropped (waiting while
/// another thread's script is in force).
pub fn script_answers(bytes: &[u8]) -> Script {
    let gate = GATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut answers = VecDeque::new();
    let mut at = bytes;
    while let [status, flags, rest @ ..] = at {
        at = rest;
        let mut headers = Vec::new();
        for (bit, name) in HEADERS.iter().enumerate() {
            if flags & (1 << bit) == 0 {
                continue;
            }
            let Some((&len, rest)) = at.split_first() else { break };
            let len = usize::from(len).min(rest.len());
            headers.push((*name, rest[..len].to_vec()));
            at = &rest[len..];
        }
        let len = match at {
            [a, b, rest @ ..] => {
                at = rest;
                usize::from(u16::from_le_bytes([*a, *b])).min(at.len())
            }
            _ => 0,
        };
        let body = at[..len].to_vec();
        at = &at[len..];
        let status = STATUSES[usize::from(*status) % STATUSES.len()];
        answers.push_back(Answer { status, headers, body });
    }
    *SCRIPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(answers);
    Script { _gate: gate }
}

/// Whether a script is set.
pub(crate) fn active() -> bool {
    SCRIPT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
}

/// The service that answers from the script.
#[derive(Debug)]
pub(crate) struct Scripted;

#[async_trait::async_trait]
impl HttpService for Scripted {
    async fn call(&self, _req: HttpRequest) -> Result<HttpResponse, HttpError> {
        let next = SCRIPT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
            .and_then(VecDeque::pop_front);
        let answer = next.unwrap_or(Answer { status: 404, headers: Vec::new(), body: Vec::new() });
        let mut response = http::Response::builder().status(answer.status);
        for (name, value) in &answer.headers {
            if let Ok(value) = http::HeaderValue::from_bytes(value) {
                response = response.header(*name, value);
            }
        }
        let body = HttpResponseBody::from(Bytes::from(answer.body));
        Ok(response.body(body).unwrap_or_else(|_| {
            let mut r = HttpResponse::new(HttpResponseBody::from(Bytes::new()));
            *r.status_mut() = http::StatusCode::NOT_FOUND;
            r
        }))
    }
}
