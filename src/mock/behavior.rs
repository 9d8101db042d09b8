//! The mock upstream's fault vocabulary: [`Behavior`] and its `x-mock-fault` text form.
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What the mock upstream does with one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Behavior {
    /// Normal answer for the endpoint, streamed or not per the request body's `"stream": true`.
    #[default]
    Ok,
    /// Error status; the default body is an OpenAI error object (Anthropic format on `/v1/messages`).
    Status { code: u16, body: Option<String> },
    /// Read the request, send nothing for this long, then answer normally.
    HangBeforeHeaders(Duration),
    /// Send 200 and the response headers, then nothing for this long, then the normal body.
    StallAfterHeaders(Duration),
    /// `chunks` content chunks with `delay` between each, then the terminal event.
    Stream { chunks: usize, delay: Duration },
    /// `after_chunks` chunks, then the connection is closed abruptly (no terminal event,
    /// no clean end of the chunked body).
    CutMidStream { after_chunks: usize },
    /// `chunks` chunks, then a clean end of body without the terminal event.
    EndWithoutTerminal { chunks: usize },
    /// `: keepalive` SSE comments every `interval`, then a normal stream.
    KeepaliveThenOk {
        keepalives: usize,
        interval: Duration,
    },
    /// 200 whose body is only an error object; for streams the first event is that error.
    HiddenError { code: Option<u16> },
    /// Headers at once, body after `delay`.
    SlowBody { delay: Duration },
    /// 200 with an empty body.
    EmptyOk,
    /// 307 to `location`.
    Redirect { location: String },
}

/// A `x-mock-fault` / `--fault` value that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseFaultError(pub String);

impl fmt::Display for ParseFaultError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid mock fault: {}", self.0)
    }
}

impl std::error::Error for ParseFaultError {}

fn bad(s: &str) -> ParseFaultError {
    ParseFaultError(s.to_string())
}

fn dur(s: &str, whole: &str) -> Result<Duration, ParseFaultError> {
    humantime::parse_duration(s.trim()).map_err(|_| bad(whole))
}

fn num<T: FromStr>(s: &str, whole: &str) -> Result<T, ParseFaultError> {
    s.trim().parse().map_err(|_| bad(whole))
}

/// Splits `"a:b"` into `(a, b)`.
fn pair<'a>(v: &'a str, whole: &str) -> Result<(&'a str, &'a str), ParseFaultError> {
    v.split_once(':').ok_or_else(|| bad(whole))
}

impl FromStr for Behavior {
    type Err = ParseFaultError;

    /// Parses the `x-mock-fault` vocabulary: `ok`, `status=503`, `hang=2s`, `stall=2s`,
    /// `stream=20:10ms`, `cut=3`, `eof=3`, `keepalive=3:100ms`, `hidden`, `hidden=429`,
    /// `empty`, `slow=1s`, `redirect=http://...`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let whole = s.trim();
        let (key, val) = match whole.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (whole, None),
        };
        let need = || val.ok_or_else(|| bad(whole));
        Ok(match key {
            "ok" => Behavior::Ok,
            "empty" => Behavior::EmptyOk,
            "status" => {
                let code: u16 = num(need()?, whole)?;
                if !(100..=999).contains(&code) {
                    return Err(bad(whole));
                }
                Behavior::Status { code, body: None }
            }
            "hang" => Behavior::HangBeforeHeaders(dur(need()?, whole)?),
            "stall" => Behavior::StallAfterHeaders(dur(need()?, whole)?),
            "slow" => Behavior::SlowBody {
                delay: dur(need()?, whole)?,
            },
            "stream" => {
                let (n, d) = pair(need()?, whole)?;
                Behavior::Stream {
                    chunks: num(n, whole)?,
                    delay: dur(d, whole)?,
                }
            }
            "cut" => Behavior::CutMidStream {
                after_chunks: num(need()?, whole)?,
            },
            "eof" => Behavior::EndWithoutTerminal {
                chunks: num(need()?, whole)?,
            },
            "keepalive" => {
                let (n, d) = pair(need()?, whole)?;
                Behavior::KeepaliveThenOk {
                    keepalives: num(n, whole)?,
                    interval: dur(d, whole)?,
                }
            }
            "hidden" => Behavior::HiddenError {
                code: match val {
                    Some(v) => Some(num(v, whole)?),
                    None => None,
                },
            },
            "redirect" => Behavior::Redirect {
                location: need()?.to_string(),
            },
            _ => return Err(bad(whole)),
        })
    }
}
