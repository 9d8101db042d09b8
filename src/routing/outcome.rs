//! What one attempt produced (`Outcome`) and what it means (`OutcomeFacts`), derived once per
//! attempt: the status after the channel's `status_code_mapping`, whose fault it was (the
//! caller's, the key's, the upstream's), whether it may have been charged, and the class it
//! is counted under. The breaker, cooldown, health window, auto-disable, the classifier, the
//! metrics and the request log all read these facts; none derives them again.

use std::collections::BTreeMap;

use super::family::{retryable, PathFamily};

/// Why an attempt failed before any HTTP status was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    Connect,
    Dns,
    Tls,
    Reset,
    HeaderTimeout,
    FirstByteTimeout,
    /// Non-stream body read timeout.
    BodyTimeout,
    /// The connection broke mid-response.
    Broken,
    /// A 2xx with an empty body.
    EmptyBody,
}

impl TransportKind {
    /// Every kind, for tables and tests.
    pub const ALL: [TransportKind; 9] = [
        TransportKind::Connect,
        TransportKind::Dns,
        TransportKind::Tls,
        TransportKind::Reset,
        TransportKind::HeaderTimeout,
        TransportKind::FirstByteTimeout,
        TransportKind::BodyTimeout,
        TransportKind::Broken,
        TransportKind::EmptyBody,
    ];

    pub(crate) fn is_timeout(self) -> bool {
        matches!(
            self,
            Self::HeaderTimeout | Self::FirstByteTimeout | Self::BodyTimeout
        )
    }

    pub(crate) fn is_pre_send(self) -> bool {
        matches!(self, Self::Connect | Self::Dns | Self::Tls)
    }
}

/// Why a channel could not send an attempt at all (its `channel:*` code): a fault of the
/// channel's configuration or of its keys' state, never the client's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelFault {
    /// `channel:invalid_key`: the key cannot be a header value (counts for auto-disable).
    InvalidKey,
    /// `channel:invalid_request`: the request cannot be built from the channel's config.
    InvalidRequest,
    /// Every key of the step is held back by its own limits or cool-down (R15.3): why.
    KeyHeldBack(String),
}

impl std::fmt::Display for ChannelFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelFault::InvalidKey => f.write_str("channel:invalid_key"),
            ChannelFault::InvalidRequest => f.write_str("channel:invalid_request"),
            ChannelFault::KeyHeldBack(why) => f.write_str(why),
        }
    }
}

/// What one upstream attempt produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Status {
        code: u16,
        error_code: Option<String>,
        error_type: Option<String>,
        message: String,
    },
    Transport(TransportKind),
    /// The channel cannot send this request at all: always fail over (R4.4).
    ChannelError(ChannelFault),
    /// Unreadable body, billing failure, content policy, internal: return at once.
    SkipRetry(String),
    /// The client disconnected: stop.
    ClientGone,
    /// Gateway-side adapter error: never replayed.
    LocalAdapter(String),
    /// The whole-request deadline passed: stop.
    DeadlineExceeded,
}

/// Error codes/types that blame the key rather than the channel (R7.1).
const KEY_FAULT_MARKERS: &[&str] = &[
    "insufficient_quota",
    "invalid_api_key",
    "account_deactivated",
    "billing_not_active",
    "arrearage",
    "authentication_error",
    "permission_error",
    "rate_limit_exceeded",
    "quota_exceeded",
];

/// Apply a channel's `status_code_mapping` (R4.4).
pub fn map_status(code: u16, mapping: &BTreeMap<u16, u16>) -> u16 {
    mapping.get(&code).copied().unwrap_or(code)
}

/// Is this failure the key's fault (401, 403, 429, quota/credential errors)? (R4.3)
pub fn is_key_fault(outcome: &Outcome) -> bool {
    match outcome {
        Outcome::Status {
            code,
            error_code,
            error_type,
            ..
        } => {
            matches!(code, 401 | 403 | 429)
                || [error_code, error_type]
                    .into_iter()
                    .flatten()
                    .any(|s| KEY_FAULT_MARKERS.iter().any(|m| s.eq_ignore_ascii_case(m)))
        }
        Outcome::ChannelError(fault) => *fault == ChannelFault::InvalidKey,
        _ => false,
    }
}

/// Statuses the caller caused (after mapping): never a breaker failure (R6.2).
const CALLER_FAULT: &[u16] = &[400, 404, 413, 422];

/// What one attempt's outcome means (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeFacts {
    /// The outcome with the channel's `status_code_mapping` applied: what every rule reads.
    pub outcome: Outcome,
    /// The upstream's own status, before mapping (the attempt record).
    pub upstream_status: Option<u16>,
    /// The status after mapping.
    pub status: Option<u16>,
    /// A success: `Outcome::Success` or a 2xx after mapping.
    pub success: bool,
    /// The request's fault: 400, 404, 413 or 422 after mapping (never counts against a
    /// breaker, R6.2).
    pub caller_fault: bool,
    /// The key's fault: 401, 403, 429 or a quota/credential error (moves to the channel's
    /// next key, R4.3).
    pub key_fault: bool,
    /// The upstream's fault: a 5xx, 408 or 429 after mapping, a transport failure, a
    /// `channel:*` error (what cools a channel down, R6.4).
    pub upstream_fault: bool,
    /// The upstream had a part in it: everything but a client that left, the deadline and
    /// local errors (what the health window counts, R7.3).
    pub counted: bool,
    /// R10.4: unknown whether the upstream charged for it.
    pub possibly_charged: bool,
    /// The low-cardinality class of metrics and the request log.
    pub class: &'static str,
}

impl OutcomeFacts {
    /// The facts of `outcome` on a channel with `mapping`, for a request of `family`.
    pub fn of(outcome: &Outcome, mapping: &BTreeMap<u16, u16>, family: PathFamily) -> Self {
        let upstream_status = match outcome {
            Outcome::Status { code, .. } => Some(*code),
            _ => None,
        };
        let mapped = match outcome {
            Outcome::Status {
                code,
                error_code,
                error_type,
                message,
            } => Outcome::Status {
                code: map_status(*code, mapping),
                error_code: error_code.clone(),
                error_type: error_type.clone(),
                message: message.clone(),
            },
            o => o.clone(),
        };
        let status = upstream_status.map(|c| map_status(c, mapping));
        let success =
            matches!(outcome, Outcome::Success) || status.is_some_and(|c| (200..300).contains(&c));
        let upstream_fault = match status {
            Some(c) => (500..=599).contains(&c) || c == 429 || c == 408,
            None => matches!(outcome, Outcome::Transport(_) | Outcome::ChannelError(_)),
        };
        OutcomeFacts {
            upstream_status,
            status,
            success,
            caller_fault: status.is_some_and(|c| CALLER_FAULT.contains(&c)),
            key_fault: is_key_fault(&mapped),
            upstream_fault,
            counted: !matches!(
                outcome,
                Outcome::ClientGone | Outcome::LocalAdapter(_) | Outcome::DeadlineExceeded
            ),
            possibly_charged: possibly_charged(outcome, family),
            class: error_class(outcome),
            outcome: mapped,
        }
    }

    /// The facts of a successful attempt answered with `status`.
    pub fn succeeded(status: u16) -> Self {
        OutcomeFacts {
            upstream_status: Some(status),
            status: Some(status),
            ..OutcomeFacts::of(&Outcome::Success, &BTreeMap::new(), PathFamily::Chat)
        }
    }

    /// The class of a target skipped because its format cannot express the request (R16.1).
    pub const SKIPPED: &'static str = "translation_skipped";

    /// The facts of a skipped target: nothing reached the upstream, nothing is counted.
    pub fn skipped() -> Self {
        OutcomeFacts {
            counted: false,
            class: Self::SKIPPED,
            ..OutcomeFacts::of(
                &Outcome::LocalAdapter(String::new()),
                &BTreeMap::new(),
                PathFamily::Chat,
            )
        }
    }

    /// An attempt the breaker refused (R6.1): counted as `circuit_open`.
    pub fn refused(mut self) -> Self {
        self.class = "circuit_open";
        self
    }
}

/// R10.4: did this attempt end with an unknown outcome after the request was sent
/// (timeout, broken or reset connection, empty 2xx, deadline while waiting) on a
/// path that bills an artifact? An `Idempotency-Key` does not clear the mark: it
/// makes a replay safe, not this attempt's charge known.
pub fn possibly_charged(outcome: &Outcome, family: PathFamily) -> bool {
    let unknown = match outcome {
        Outcome::Transport(k) => !k.is_pre_send(),
        Outcome::DeadlineExceeded => true,
        _ => false,
    };
    unknown && !retryable(family, false)
}

/// Low-cardinality label of an outcome (metrics and the request log).
pub fn error_class(o: &Outcome) -> &'static str {
    match o {
        Outcome::Success => "success",
        Outcome::Status { code: 429, .. } => "http_429",
        Outcome::Status { code, .. } if *code >= 500 => "http_5xx",
        Outcome::Status { .. } => "http_4xx",
        Outcome::Transport(TransportKind::HeaderTimeout) => "header_timeout",
        Outcome::Transport(TransportKind::FirstByteTimeout) => "first_byte_timeout",
        Outcome::Transport(TransportKind::BodyTimeout) => "body_timeout",
        Outcome::Transport(TransportKind::EmptyBody) => "empty_body",
        Outcome::Transport(TransportKind::Broken) => "broken",
        // The connection was made and then failed (the request may have reached the
        // upstream): not "connect", which reads as "never reached it" (B-log-truth).
        Outcome::Transport(TransportKind::Reset) => "reset",
        Outcome::Transport(_) => "connect",
        Outcome::ChannelError(_) => "channel_error",
        Outcome::SkipRetry(_) => "skip_retry",
        Outcome::ClientGone => "client_gone",
        Outcome::LocalAdapter(_) => "local_error",
        Outcome::DeadlineExceeded => "deadline",
    }
}
