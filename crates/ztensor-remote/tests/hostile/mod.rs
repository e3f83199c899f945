//! A lying server on loopback: every byte from the network is bounded by what was asked, no
//! redirect leaves a signed endpoint or reaches an internal address, and no credential is
//! printed, whatever the server sends.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::liar::{self, Answer, Request};

use ztensor_remote::{ErrorKind, Location, RemoteObject, RemoteOptions, RemoteUpload};
use ztensor_source::ReadAt;

/// Credentials no message may hold.
const KEY_ID: &str = "AKIALIARTESTKEYID0001";
const SECRET: &str = "liar-secret-access-key-0123456789";
const TOKEN: &str = "liar-session-token-abcdefghijklmnop";

/// More than any loopback socket buffers hold: a client that stops reading at its bound makes
/// the server stall far below this; one that reads on takes it all within the time bound.
const SENT_BOUND: u64 = 48 << 20;

/// Signed S3 options for the server at `endpoint`, with a session token.
fn s3(endpoint: &str) -> RemoteOptions {
    let settings = [
        ("aws_endpoint", endpoint),
        ("aws_access_key_id", KEY_ID),
        ("aws_secret_access_key", SECRET),
        ("aws_session_token", TOKEN),
        ("aws_region", "us-east-1"),
    ];
    RemoteOptions {
        settings: settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        timeout: Duration::from_secs(20),
        ..RemoteOptions::default()
    }
}

fn plain() -> RemoteOptions {
    RemoteOptions { timeout: Duration::from_secs(20), ..RemoteOptions::default() }
}

/// Checks that `text` holds no credential of the test.
fn clean(text: &str) {
    for secret in [KEY_ID, SECRET, TOKEN, "PASSWORD99"] {
        assert!(!text.contains(secret), "{secret} shown in: {text}");
    }
}

/// An object of `len` bytes, answered as S3 and plain web servers answer ranged GETs.
fn object(len: usize) -> impl Fn(&Request) -> Answer + Send + Sync + 'static {
    let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    move |req: &Request| {
        let (start, end) = match req.header("range").and_then(|r| r.strip_prefix("bytes=")) {
            Some(r) => match r.split_once('-').unwrap() {
                ("", n) => (data.len().saturating_sub(n.parse().unwrap()), data.len() - 1),
                (a, b) => (a.parse().unwrap(), b.parse::<usize>().unwrap().min(data.len() - 1)),
            },
            None => (0, data.len() - 1),
        };
        let head = vec![
            format!("Content-Range: bytes {start}-{end}/{}", data.len()),
            "ETag: \"v1\"".to_owned(),
            "Last-Modified: Mon, 07 Dec 2026 00:00:00 GMT".to_owned(),
            "Accept-Ranges: bytes".to_owned(),
        ];
        let status = if req.method == "HEAD" { 200 } else { 206 };
        let body = if req.method == "HEAD" { Vec::new() } else { data[start..=end].to_vec() };
        Answer::Full(status, head, body)
    }
}

#[test]
fn an_endless_error_answer_is_read_only_as_far_as_its_bound() {
    for status in [404u16, 403, 500] {
        let liar = liar::start(move |_| {
            Answer::Endless(status, Vec::new(), format!("<Error><Code>X</Code> {TOKEN} ").into())
        });
        let began = Instant::now();
        for (url, options) in [
            (format!("{}/model.zt", liar.endpoint), plain()),
            ("s3://bucket/model.zt".to_owned(), s3(&liar.endpoint)),
        ] {
            let err = RemoteObject::open(&Location::parse(&url).unwrap(), &options).unwrap_err();
            let expected = match status {
                404 => matches!(err.kind(), ErrorKind::NotFound),
                403 => matches!(err.kind(), ErrorKind::Denied { .. }),
                _ => matches!(err.kind(), ErrorKind::Request),
            };
            assert!(expected, "{status} {url}: {err}");
            clean(&err.to_string());
        }
        // Retried answers (500) each fill the loopback socket's buffers once.
        let (sent, requests) = (liar.sent.load(Ordering::Relaxed), liar.seen.lock().unwrap().len());
        assert!(
            sent < SENT_BOUND * requests as u64,
            "{status}: the client took {sent} bytes of error answers to {requests} requests"
        );
        assert!(began.elapsed() < Duration::from_secs(60), "{status}: {:?}", began.elapsed());
    }
}

#[test]
fn a_ranged_read_answered_past_its_range_fails_at_the_range() {
    let liar = liar::start(|req| {
        // The range asked for, as a server of a 1 GB object answers it.
        let total = 1_000_000_000u64;
        let range = match req.header("range").and_then(|r| r.strip_prefix("bytes=")) {
            Some(r) => match r.split_once('-').unwrap() {
                ("", n) => format!("bytes {}-{}", total - n.parse::<u64>().unwrap(), total - 1),
                (a, b) => format!("bytes {a}-{b}"),
            },
            None => format!("bytes 0-{}", total - 1),
        };
        Answer::Endless(
            206,
            vec![
                format!("Content-Range: {range}/{total}"),
                "Content-Length: 3000000000".into(),
                "ETag: \"v1\"".into(),
            ],
            b"0123456789".to_vec(),
        )
    });
    for (url, options) in [
        (format!("{}/model.zt", liar.endpoint), plain()),
        ("s3://bucket/model.zt".to_owned(), s3(&liar.endpoint)),
    ] {
        let err = RemoteObject::open(&Location::parse(&url).unwrap(), &options).unwrap_err();
        assert_eq!(err.kind(), &ErrorKind::Request, "{err}");
        // Refused by the client's bound on the body, or (when the body's pieces end at the
        // range) by the read's own count of what came: each names the bound.
        let text = err.to_string();
        assert!(text.contains("longer than the") || text.contains("sent more than the"), "{text}");
        clean(&text);
    }
    // Each answer cut at its range (the client resumes a failed body a bounded number of
    // times), however long the server said it was.
    let (sent, requests) = (liar.sent.load(Ordering::Relaxed), liar.seen.lock().unwrap().len());
    assert!(requests <= 2 * 11, "{requests} requests");
    assert!(
        sent < SENT_BOUND * requests as u64,
        "the client took {sent} bytes past the ranges of {requests} requests"
    );
}

#[test]
fn an_endless_answer_to_an_upload_completion_is_refused() {
    let liar = liar::start(|req| {
        let q = req.target.split_once('?').map_or("", |(_, q)| q);
        match req.method.as_str() {
            "POST" if q.starts_with("uploads") => Answer::Full(
                200,
                Vec::new(),
                b"<InitiateMultipartUploadResult><Bucket>bucket</Bucket><Key>big.zt</Key>\
                  <UploadId>U1</UploadId></InitiateMultipartUploadResult>"
                    .to_vec(),
            ),
            "PUT" if q.contains("partNumber") => {
                Answer::Full(200, vec!["ETag: \"part\"".into()], Vec::new())
            }
            "POST" => Answer::Endless(200, Vec::new(), b"<CompleteMultipartUploadResult>".to_vec()),
            "DELETE" => Answer::Full(204, Vec::new(), Vec::new()),
            _ => Answer::Full(404, Vec::new(), b"<Error><Code>NoSuchKey</Code></Error>".to_vec()),
        }
    });
    let at = Location::parse("s3://bucket/big.zt").unwrap();
    let mut up = RemoteUpload::create(&at, &s3(&liar.endpoint)).unwrap();
    up.write_all(&vec![7u8; ztensor_remote::PART_LEN + 1]).unwrap();
    let err = up.finish().unwrap_err();
    assert!(err.to_string().contains("longer than the"), "{err}");
    clean(&err.to_string());
    let sent = liar.sent.load(Ordering::Relaxed);
    assert!(sent < SENT_BOUND, "the client took {sent} bytes of a completion's answer");
}

#[test]
fn redirects_never_leave_a_signed_endpoint() {
    let elsewhere = liar::start(object(1000));
    for to in [
        format!("{}/bucket/model.zt", elsewhere.endpoint),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
    ] {
        let liar =
            liar::start(move |_| Answer::Full(307, vec![format!("Location: {to}")], Vec::new()));
        let at = Location::parse("s3://bucket/model.zt").unwrap();
        let err = RemoteObject::open(&at, &s3(&liar.endpoint)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("redirected to") && text.contains("never leaves"), "{text}");
        assert!(text.contains(&liar.endpoint), "{text}");
        clean(&text);
    }
    assert!(elsewhere.seen.lock().unwrap().is_empty(), "{:?}", elsewhere.seen.lock().unwrap());
}

#[test]
fn plain_http_follows_a_few_redirects_but_none_inward() {
    // Within its origin, a redirect is followed and the object read.
    let serve = object(5000);
    let liar = liar::start(move |req| {
        if req.target.starts_with("/old") {
            Answer::Full(302, vec!["Location: /new/model.zt".into()], Vec::new())
        } else {
            serve(req)
        }
    });
    let at = Location::parse(&format!("{}/old/model.zt", liar.endpoint)).unwrap();
    let object_read = RemoteObject::open(&at, &plain()).unwrap();
    let mut buf = [0u8; 100];
    object_read.read_exact_at(4000, &mut buf).unwrap();
    assert!(buf.iter().enumerate().all(|(i, &b)| b == ((4000 + i) % 251) as u8));

    // To another origin on an internal address: refused before any request is sent there.
    let elsewhere = liar::start(object(1000));
    let inward = [
        format!("{}/model.zt", elsewhere.endpoint),
        "http://169.254.169.254/latest/meta-data/iam/".to_owned(),
        "http://[::1]:1/model.zt".to_owned(),
    ];
    for to in inward {
        let liar =
            liar::start(move |_| Answer::Full(301, vec![format!("Location: {to}")], Vec::new()));
        let at = Location::parse(&format!("{}/model.zt", liar.endpoint)).unwrap();
        let err = RemoteObject::open(&at, &plain()).unwrap_err();
        assert!(err.to_string().contains("loopback, link-local"), "{err}");
    }
    assert!(elsewhere.seen.lock().unwrap().is_empty());

    // A loop ends after the most redirects followed.
    let looping = liar::start(|req| {
        let n: u32 = req.target.trim_start_matches("/r").parse().unwrap_or(0);
        Answer::Full(302, vec![format!("Location: /r{}", n + 1)], Vec::new())
    });
    let at = Location::parse(&format!("{}/r0", looping.endpoint)).unwrap();
    let err = RemoteObject::open(&at, &plain()).unwrap_err();
    assert!(err.to_string().contains("too many redirects"), "{err}");
    assert!(looping.seen.lock().unwrap().len() <= ztensor_remote::MAX_REDIRECTS + 1);
}

#[test]
fn no_credential_is_printed_whatever_the_server_echoes() {
    // A refusal quoting the request: the code is kept, nothing else.
    let liar = liar::start(|req| {
        let echoed = format!(
            "<Error><Code>AccessDenied</Code><Message>{:?} {TOKEN} {SECRET} {KEY_ID}</Message></Error>",
            req.headers
        );
        Answer::Full(403, Vec::new(), echoed.into())
    });
    let err =
        RemoteObject::open(&Location::parse("s3://bucket/k.zt").unwrap(), &s3(&liar.endpoint))
            .unwrap_err();
    assert_eq!(err.kind(), &ErrorKind::Denied { code: Some("AccessDenied".into()) });
    assert!(err.to_string().contains("403"), "{err}");
    clean(&err.to_string());
    clean(&format!("{err:?}"));
    // The same as the answer to an upload's start.
    let err =
        RemoteUpload::create(&Location::parse("s3://bucket/k.zt").unwrap(), &s3(&liar.endpoint))
            .and_then(|mut up| {
                up.write_all(&vec![1u8; ztensor_remote::PART_LEN + 1]).map_err(|e| {
                    ztensor_remote::Error::clone(
                        e.get_ref().and_then(|e| e.downcast_ref()).expect("a remote error"),
                    )
                })?;
                up.finish()
            })
            .unwrap_err();
    clean(&err.to_string());

    // A password in the endpoint, whether the server is unreachable or answers an error.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let failing = liar::start(|_| Answer::Full(500, Vec::new(), b"PASSWORD99".to_vec()));
    let port = failing.endpoint.rsplit(':').next().unwrap().to_owned();
    for port in [closed.to_string(), port] {
        let endpoint = format!("http://user:PASSWORD99@127.0.0.1:{port}");
        let mut options = s3(&endpoint);
        options.timeout = Duration::from_secs(3);
        let err = RemoteObject::open(&Location::parse("s3://bucket/k.zt").unwrap(), &options)
            .unwrap_err();
        clean(&err.to_string());
        clean(&format!("{err:?}"));
    }
}
