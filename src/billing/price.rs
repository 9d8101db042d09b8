//! Prices and amounts: credits ↔ micro-credits, the cost of a usage, and the pre-charge
//! estimate of a request body (R11.1).
//!
//! A price is in credits per million tokens, so one credit per million tokens is exactly one
//! micro-credit per token:
//! `cost_micro = input × uncached prompt + cache_read × cache reads + cache_write × cache
//! writes + output × completion_tokens`, rounded to the nearest micro-credit once per request.
//! Usage is normalised first (`wire::usage`): prompt tokens count every input token, cache
//! reads and writes included, whatever the wire format.

use crate::config::model::Price;
use crate::wire::usage::Usage;

/// Micro-credits in one credit.
pub const MICRO: i64 = 1_000_000;

pub use crate::config::model::DEFAULT_MAX_TOKENS;

/// The completion tokens the estimate assumes for a request that names no limit: the
/// model's `pricing.<model>.max_output`, else [`DEFAULT_MAX_TOKENS`]. For quota- and
/// tpm-limited clients the gateway sends this limit upstream (B-token-estimate), so the
/// settle overshoot bound of R11.3 holds for them.
pub fn default_output(price: Option<&Price>) -> u64 {
    price
        .and_then(|p| p.max_output)
        .unwrap_or(DEFAULT_MAX_TOKENS)
}

/// Request body bytes per estimated prompt token.
pub const BYTES_PER_TOKEN: u64 = 4;

/// A configured quota (whole credits) in micro-credits, saturating.
pub fn quota_micro(credits: u64) -> i64 {
    i64::try_from(credits)
        .unwrap_or(i64::MAX)
        .saturating_mul(MICRO)
}

/// Micro-credits as credits (for display only; amounts are always kept as integers).
pub fn credits(micro: i64) -> f64 {
    micro as f64 / MICRO as f64
}

/// The cost of `usage` at `price`, in micro-credits. Cache reads and writes are part of
/// `prompt_tokens`; they cost `cache_read` / `cache_write` when the price names them, else
/// the input price.
pub fn cost(price: &Price, usage: &Usage) -> i64 {
    let non_negative = |x: f64| x.max(0.0);
    let read = usage.cached_tokens.min(usage.prompt_tokens);
    let write = usage.cache_write_tokens.min(usage.prompt_tokens - read);
    let plain = usage.prompt_tokens - read - write;
    let input = non_negative(price.input) * plain as f64
        + non_negative(price.cache_read.unwrap_or(price.input)) * read as f64
        + non_negative(price.cache_write.unwrap_or(price.input)) * write as f64;
    let output = non_negative(price.output) * usage.completion_tokens as f64;
    // `as` saturates on overflow and maps NaN to 0.
    (input + output).round() as i64
}

/// What the pre-charge assumes a request will use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Estimate {
    /// Prompt: `body_len` / 4 (rounded up). Completion: the request's own limit
    /// (`max_completion_tokens`, `max_tokens` or `max_output_tokens`), else
    /// [`DEFAULT_MAX_TOKENS`].
    pub fn new(body_len: usize, completion_limit: Option<u64>) -> Estimate {
        Estimate {
            prompt_tokens: (body_len as u64).div_ceil(BYTES_PER_TOKEN),
            completion_tokens: completion_limit.unwrap_or(DEFAULT_MAX_TOKENS),
        }
    }

    pub fn usage(&self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            ..Usage::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let price = Price {
            input: 1000.0,
            output: 2000.0,
            cache_read: None,
            cache_write: None,
            max_output: None,
        };
        let usage = Usage {
            prompt_tokens: 10,
            completion_tokens: 3,
            cached_tokens: 4,
            cache_write_tokens: 0,
            ..Default::default()
        };
        assert_eq!(cost(&price, &usage), 10 * 1000 + 3 * 2000);
        let cheap = Price {
            input: 0.27,
            output: 1.1,
            cache_read: None,
            cache_write: None,
            max_output: None,
        };
        // 2.7 + 3.3 = 6.0 micro-credits
        assert_eq!(cost(&cheap, &usage), 6);
    }

    #[test]
    fn cache_reads_and_writes_at_their_own_prices() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cache_read: Some(0.3),
            cache_write: Some(3.75),
            max_output: None,
        };
        // 100 plain + 100 000 read + 1 000 written input tokens, 10 output.
        let usage = Usage {
            prompt_tokens: 101_100,
            completion_tokens: 10,
            cached_tokens: 100_000,
            cache_write_tokens: 1_000,
            ..Default::default()
        };
        assert_eq!(cost(&price, &usage), 300 + 30_000 + 3_750 + 150);
        // Counts that do not add up never go below zero or bill a token twice.
        let odd = Usage {
            prompt_tokens: 5,
            completion_tokens: 0,
            cached_tokens: 4,
            cache_write_tokens: 9,
            ..Default::default()
        };
        assert_eq!(cost(&price, &odd), (4.0f64 * 0.3 + 3.75).round() as i64);
    }

    /// The estimate of a body as the gateway makes it: the limit comes from the request's
    /// one parse (`wire::request::peek`).
    fn estimate(body: &[u8]) -> Estimate {
        let limit = crate::wire::request::peek(body)
            .ok()
            .and_then(|p| p.completion_hint);
        Estimate::new(body.len(), limit)
    }

    #[test]
    fn estimate_reads_the_limit_fields() {
        let body = br#"{"model":"m","max_tokens":7}"#;
        assert_eq!(
            estimate(body),
            Estimate {
                prompt_tokens: (body.len() as u64).div_ceil(4),
                completion_tokens: 7
            }
        );
        let body = br#"{"max_completion_tokens":9,"max_tokens":7}"#;
        assert_eq!(estimate(body).completion_tokens, 9);
        let body = br#"{"max_output_tokens":5}"#;
        assert_eq!(estimate(body).completion_tokens, 5);
        assert_eq!(estimate(b"not json").completion_tokens, DEFAULT_MAX_TOKENS);
        assert_eq!(estimate(b"").prompt_tokens, 0);
        assert_eq!(estimate(b"12345").prompt_tokens, 2);
    }

    #[test]
    fn quota_conversion_saturates() {
        assert_eq!(quota_micro(3), 3_000_000);
        assert_eq!(quota_micro(u64::MAX), i64::MAX);
    }
}
