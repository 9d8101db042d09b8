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
    /// The stream's opening (Anthropic `message_start`, the chat role chunk, ...), then
    /// silence for this long — a model reasoning before its first token — then the answer.
    ThinkSilently(Duration),
    /// `after_chunks` chunks, then the connection is closed abruptly (no terminal event,
    /// no clean end of the chunked body).
    CutMidStream { after_chunks: usize },
    /// `chunks` chunks, then a clean end of body without the terminal event.
    EndWithoutTerminal { chunks: usize },
    /// `after_chunks` chunks, then the dialect's error event (as `ErrorAfterStart` sends it,
    /// `code` picking its type) and the end of the body: an overload in mid-answer.
    ErrorMidStream { after_chunks: usize, code: u16 },
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
    /// A tool call (`get_weather`, `{"city": "Paris"}`) in the endpoint's format, streamed
    /// or not as asked (`tool`).
    ToolCall,
    /// 307 to `location`.
    Redirect { location: String },
    /// A stream whose preamble (Anthropic `message_start` + `ping`, Responses
    /// `response.created`, the chat role chunk) is followed by an error event and the end of
    /// the body, as Anthropic reports an overload; `code` picks the error type.
    ErrorAfterStart { code: u16 },
    /// 200 and the first bytes of an event, then one more byte every `interval`, never
    /// completing an event (for at most ten minutes).
    Drip { interval: Duration },
    /// After the opening and the first content event, `bytes` bytes that never end an event
    /// (a hostile upstream).
    Flood { bytes: usize },
    /// A JSON answer padded with `bytes` spaces after its opening brace.
    Pad { bytes: usize },
    /// Each call draws one of [`CHAOS`] (errors, 429s, hangs, hidden errors, truncated
    /// bodies, cut streams, coalesced or split frames, and plain answers).
    Chaos,
    /// `base` written with the wire shape `wire`.
    Shaped(Box<Behavior>, Wire),
    /// 200 with this content type and body, as given (not in the `x-mock-fault` vocabulary):
    /// for answers of odd shapes. `text/event-stream` bodies are written one event per write.
    Raw { content_type: String, body: String },
}

/// How the bytes of an answer reach the wire. The default is one write per SSE event (and
/// one for a whole JSON answer), chunked transfer encoding, and gzip only for a non-stream
/// JSON answer to a request that accepts it — as real providers do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Wire {
    /// Every run of writes between pauses is joined into one write (`coalesce`).
    pub coalesce: bool,
    /// The body re-cut into writes of these sizes, cycling (`split=3/7/1`); empty = as rendered.
    pub split: Vec<usize>,
    /// A pause between the writes of `split` (`gap=1ms`), so each is its own read.
    pub gap: Duration,
    /// `Content-Length` framing instead of chunked (`cl`).
    pub content_length: bool,
    /// `Content-Encoding: gzip` whatever the request accepts, streams included (`gzip`).
    pub gzip: bool,
    /// SSE lines end in `\r\n` (`crlf`), as Gemini's do.
    pub crlf: bool,
}

/// The faults `chaos` draws from, in the `x-mock-fault` vocabulary.
pub const CHAOS: &[&str] = &[
    "ok",
    "ok",
    "ok",
    "ok,coalesce",
    "ok,split=7/1/13",
    "status=503",
    "status=429",
    "status=500",
    "hang=30s",
    "stall=30s",
    "hidden",
    "hidden=429",
    "cut=2",
    "eof=2",
    "empty",
    "error_after_start=529",
    "cut=1,coalesce",
];

impl Behavior {
    /// This behaviour written with `wire`.
    pub fn with(self, wire: Wire) -> Behavior {
        match self {
            Behavior::Shaped(b, _) => Behavior::Shaped(b, wire),
            b => Behavior::Shaped(Box::new(b), wire),
        }
    }

    /// The behaviour and its wire shape.
    pub fn split(self) -> (Behavior, Wire) {
        match self {
            Behavior::Shaped(b, w) => (*b, w),
            b => (b, Wire::default()),
        }
    }
}

fn size(s: &str, whole: &str) -> Result<usize, ParseFaultError> {
    let s = s.trim();
    let (n, mul) = if let Some(n) = s.strip_suffix("MiB") {
        (n, 1 << 20)
    } else if let Some(n) = s.strip_suffix("KiB") {
        (n, 1 << 10)
    } else {
        (s, 1)
    };
    num::<usize>(n, whole)?
        .checked_mul(mul)
        .ok_or_else(|| bad(whole))
}

impl Wire {
    /// Apply one modifier; `Ok(false)` when `key` is not a wire modifier.
    fn modifier(
        &mut self,
        key: &str,
        val: Option<&str>,
        whole: &str,
    ) -> Result<bool, ParseFaultError> {
        match key {
            "coalesce" => self.coalesce = true,
            "cl" => self.content_length = true,
            "gzip" => self.gzip = true,
            "crlf" => self.crlf = true,
            "gap" => self.gap = dur(val.ok_or_else(|| bad(whole))?, whole)?,
            "split" => {
                let v = val.ok_or_else(|| bad(whole))?;
                self.split = v
                    .split('/')
                    .map(|n| {
                        num::<usize>(n, whole).and_then(|n| {
                            if n == 0 {
                                Err(bad(whole))
                            } else {
                                Ok(n)
                            }
                        })
                    })
                    .collect::<Result<_, _>>()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
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

    /// Parses the `x-mock-fault` vocabulary: a comma-separated list of at most one behaviour
    /// — `ok`, `status=503`, `hang=2s`, `stall=2s`, `stream=20:10ms`, `cut=3`, `eof=3`,
    /// `keepalive=3:100ms`, `hidden`, `hidden=429`, `empty`, `slow=1s`,
    /// `redirect=http://...`, `error_after_start=529`, `drip=100ms`, `flood=20MiB`,
    /// `pad=9MiB`, `tool`, `chaos` — and wire modifiers: `coalesce`, `split=3/7/1`, `gap=1ms`, `cl`,
    /// `gzip`, `crlf`. `ok,coalesce` is a normal answer written in one piece.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut base = None;
        let mut wire = Wire::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, val) = match part.split_once('=') {
                Some((k, v)) => (k.trim(), Some(v.trim())),
                None => (part, None),
            };
            if wire.modifier(key, val, part)? {
                continue;
            }
            if base.is_some() {
                return Err(bad(s));
            }
            base = Some(one(part)?);
        }
        let Some(base) = base.or_else(|| (wire != Wire::default()).then_some(Behavior::Ok)) else {
            return Err(bad(s));
        };
        Ok(if wire == Wire::default() {
            base
        } else {
            base.with(wire)
        })
    }
}

/// One behaviour of the vocabulary (no modifiers).
fn one(s: &str) -> Result<Behavior, ParseFaultError> {
    {
        let whole = s.trim();
        let (key, val) = match whole.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (whole, None),
        };
        let need = || val.ok_or_else(|| bad(whole));
        Ok(match key {
            "ok" => Behavior::Ok,
            "empty" => Behavior::EmptyOk,
            "tool" => Behavior::ToolCall,
            "status" => {
                let code: u16 = num(need()?, whole)?;
                if !(100..=999).contains(&code) {
                    return Err(bad(whole));
                }
                Behavior::Status { code, body: None }
            }
            "hang" => Behavior::HangBeforeHeaders(dur(need()?, whole)?),
            "stall" => Behavior::StallAfterHeaders(dur(need()?, whole)?),
            "think" => Behavior::ThinkSilently(dur(need()?, whole)?),
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
            "error_mid" => {
                let (n, code) = pair(need()?, whole)?;
                Behavior::ErrorMidStream {
                    after_chunks: num(n, whole)?,
                    code: num(code, whole)?,
                }
            }
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
            "error_after_start" => Behavior::ErrorAfterStart {
                code: match val {
                    Some(v) => num(v, whole)?,
                    None => 529,
                },
            },
            "drip" => Behavior::Drip {
                interval: dur(need()?, whole)?,
            },
            "flood" => Behavior::Flood {
                bytes: size(need()?, whole)?,
            },
            "pad" => Behavior::Pad {
                bytes: size(need()?, whole)?,
            },
            "chaos" => Behavior::Chaos,
            _ => return Err(bad(whole)),
        })
    }
}
