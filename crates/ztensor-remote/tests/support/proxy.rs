//! A fault-injecting HTTP proxy on loopback, in front of a test server: it forwards each
//! request (one per connection) and, while faults are queued, answers ranged GETs with
//! `503 SlowDown` or cuts their body mid-way, or drops or holds the answer to an upload's
//! completion.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the proxy does to the next ranged GETs, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answer `503 Slow Down` without asking the server.
    SlowDown,
    /// Forward, then send the answer's head and only half its body, and close.
    CutBody,
    /// For the request completing a multipart upload: forward it, then close without
    /// answering (the upload completed; the client never hears so).
    DropCompletion,
    /// For the request completing a multipart upload: forward it, then hold the answer for
    /// [`SLOW_COMPLETION_MS`] (the upload completed; the client hears so late).
    SlowCompletion,
}

/// How long [`Fault::SlowCompletion`] holds the answer.
pub const SLOW_COMPLETION_MS: u64 = 1_500;

/// The running proxy (its thread ends with the test process).
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    faults: Arc<Mutex<Vec<Fault>>>,
    /// Faults applied so far.
    pub applied: Arc<Mutex<Vec<Fault>>>,
    /// How the proxy serves ranged GETs: a delay before each, and the counts of those in
    /// flight.
    pub ranges: Arc<Ranges>,
    /// The same for the parts of multipart uploads.
    pub parts: Arc<Ranges>,
}

/// Requests of one kind through the proxy (ranged GETs, upload parts): each delayed by
/// `delay_ms` (a slow server), those in flight counted and their most at once kept.
#[derive(Debug, Default)]
pub struct Ranges {
    pub delay_ms: AtomicU64,
    in_flight: AtomicUsize,
    pub most_in_flight: AtomicUsize,
}

impl Ranges {
    fn begin(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(self.delay_ms.load(Ordering::SeqCst)));
    }

    fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Proxy {
    /// Queues `faults` for the next ranged GETs.
    pub fn inject(&self, faults: &[Fault]) {
        self.faults.lock().unwrap().extend_from_slice(faults);
    }
}

/// Starts a proxy in front of `upstream` (`host:port`).
pub fn start(upstream: &str) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let faults: Arc<Mutex<Vec<Fault>>> = Arc::default();
    let applied: Arc<Mutex<Vec<Fault>>> = Arc::default();
    let (ranges, parts): (Arc<Ranges>, Arc<Ranges>) = (Arc::default(), Arc::default());
    let (upstream, queued, done) = (upstream.to_owned(), Arc::clone(&faults), Arc::clone(&applied));
    let served = [Arc::clone(&ranges), Arc::clone(&parts)];
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (upstream, queued, done, served) =
                (upstream.clone(), Arc::clone(&queued), Arc::clone(&done), served.clone());
            std::thread::spawn(move || {
                let _ = serve(client, &upstream, &queued, &done, &served);
            });
        }
    });
    Proxy { endpoint, faults, applied, ranges, parts }
}

/// A request or answer head (lines without the blank one) and its body.
fn read_message(reader: &mut impl BufRead) -> std::io::Result<Option<(Vec<String>, Vec<u8>)>> {
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(if head.is_empty() { None } else { Some((head, Vec::new())) });
        }
        let line = line.trim_end_matches(['\r', '\n']).to_owned();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let len = head
        .iter()
        .find_map(|h| {
            let (name, value) = h.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0usize);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body)?;
    Ok(Some((head, body)))
}

fn write_message(out: &mut impl Write, head: &[String], body: &[u8]) -> std::io::Result<()> {
    for line in head {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            write!(out, "{line}\r\n")?;
        }
    }
    write!(out, "Connection: close\r\n\r\n")?;
    out.write_all(body)
}

fn serve(
    client: TcpStream,
    upstream: &str,
    queued: &Mutex<Vec<Fault>>,
    applied: &Mutex<Vec<Fault>>,
    [ranges, parts]: &[Arc<Ranges>; 2],
) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    // One request per connection: the answer says `Connection: close`.
    let Some((head, body)) = read_message(&mut reader)? else { return Ok(()) };
    let ranged_get = head[0].starts_with("GET ")
        && head.iter().any(|h| h.to_ascii_lowercase().starts_with("range:"));
    let completion = head[0].starts_with("POST ") && head[0].contains("uploadId=");
    let fault = {
        let mut q = queued.lock().unwrap();
        match q.first() {
            Some(Fault::DropCompletion | Fault::SlowCompletion) if completion => Some(q.remove(0)),
            Some(Fault::SlowDown | Fault::CutBody) if ranged_get => Some(q.remove(0)),
            _ => None,
        }
    };
    if let Some(f) = fault {
        applied.lock().unwrap().push(f);
    }
    let part = head[0].starts_with("PUT ") && head[0].contains("partNumber=");
    let counted = if ranged_get {
        Some(ranges)
    } else if part {
        Some(parts)
    } else {
        None
    };
    if let Some(c) = counted {
        c.begin();
    }
    let mut ending = Ending(counted.map(|c| &**c));
    answer(client, upstream, head, body, fault, &mut ending)
}

/// A counted request's end: told before its answer's bytes reach the client (so a client that
/// sends its next request once an answer is in is never counted twice at once), or when the
/// request ends otherwise.
struct Ending<'a>(Option<&'a Ranges>);

impl Ending<'_> {
    fn now(&mut self) {
        if let Some(c) = self.0.take() {
            c.end();
        }
    }
}

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        self.now();
    }
}

/// Answers one request: `fault` applied, else forwarded.
fn answer(
    mut client: TcpStream,
    upstream: &str,
    head: Vec<String>,
    body: Vec<u8>,
    fault: Option<Fault>,
    ending: &mut Ending<'_>,
) -> std::io::Result<()> {
    if fault == Some(Fault::SlowDown) {
        let body = b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Reduce your request rate.</Message></Error>";
        let head = vec![
            "HTTP/1.1 503 Slow Down".to_owned(),
            "Content-Type: application/xml".to_owned(),
            format!("Content-Length: {}", body.len()),
        ];
        ending.now();
        return write_message(&mut client, &head, body);
    }
    let mut server = TcpStream::connect(upstream)?;
    write_message(&mut server, &head, &body)?;
    let mut answer = BufReader::new(server);
    let Some((reply, reply_body)) = read_message(&mut answer)? else { return Ok(()) };
    if fault == Some(Fault::DropCompletion) {
        return client.shutdown(std::net::Shutdown::Both);
    }
    if fault == Some(Fault::SlowCompletion) {
        std::thread::sleep(std::time::Duration::from_millis(SLOW_COMPLETION_MS));
    }
    ending.now();
    if fault == Some(Fault::CutBody) {
        // The full length announced, half the bytes sent, then the connection drops.
        write_message(&mut client, &reply, &reply_body[..reply_body.len() / 2])?;
        client.flush()?;
        return client.shutdown(std::net::Shutdown::Both);
    }
    write_message(&mut client, &reply, &reply_body)
}
