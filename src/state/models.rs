//! Upstream models a channel does not serve (B-model-not-found; sub2api's `model_unsupported`): a 404
//! "model not found" for (channel, upstream model) takes that pair out of new plans for the
//! channel's `resilience.cooldown.duration`, instead of costing every request a failed
//! first attempt. Other models of the channel are unaffected.
//!
//! Bounded like the model breakers (R6.3): at most [`super::breaker::MODEL_CAP`] entries;
//! a new entry first drops the expired ones, then the one that expires soonest. Keys are
//! upstream model names from the config, never client-chosen strings.

use crate::lock::lock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use super::breaker::MODEL_CAP;
use crate::routing::policy::Outcome;

/// One channel's "model not found" marks: upstream model → unusable until.
#[derive(Debug, Default)]
pub struct MissingModels {
    map: Mutex<HashMap<String, Instant>>,
    /// Entries in `map` (read without the lock on the hot path).
    len: AtomicUsize,
}

impl MissingModels {
    /// Is `model` marked missing at `now`? Lock-free when nothing is marked.
    pub fn is_missing(&self, model: &str, now: Instant) -> bool {
        if model.is_empty() || self.len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        lock(&self.map).get(model).is_some_and(|until| *until > now)
    }

    /// Mark `model` missing until `until`.
    pub fn mark(&self, model: &str, until: Instant, now: Instant) {
        let mut marks = lock(&self.map);
        if let Some(u) = marks.get_mut(model) {
            *u = until;
            return;
        }
        if marks.len() >= MODEL_CAP {
            marks.retain(|_, u| *u > now);
            if marks.len() >= MODEL_CAP {
                if let Some(k) = marks
                    .iter()
                    .min_by_key(|(_, u)| **u)
                    .map(|(k, _)| k.clone())
                {
                    marks.remove(&k);
                }
            }
        }
        marks.insert(model.to_string(), until);
        self.len.store(marks.len(), Ordering::Relaxed);
    }

    /// Live marks with their time left, by model name.
    pub fn list(&self, now: Instant) -> Vec<(String, Duration)> {
        let mut live: Vec<_> = lock(&self.map)
            .iter()
            .filter(|(_, u)| **u > now)
            .map(|(m, u)| (m.clone(), *u - now))
            .collect();
        live.sort();
        live
    }

    pub fn clear(&self) {
        let mut marks = lock(&self.map);
        marks.clear();
        self.len.store(0, Ordering::Relaxed);
    }
}

/// Does `outcome` (after `status_code_mapping`) say the upstream does not serve the model?
/// A 404 whose error names a model or deployment (OpenAI `model_not_found`, Anthropic
/// `not_found_error` "model: ...", Gemini "models/... is not found", Azure
/// `DeploymentNotFound`, vLLM/Ollama "model ... does not exist / not found").
pub fn is_model_not_found(outcome: &Outcome) -> bool {
    let Outcome::Status {
        code: 404,
        error_code,
        message,
        ..
    } = outcome
    else {
        return false;
    };
    let code_says = error_code.as_deref().is_some_and(|c| {
        c.eq_ignore_ascii_case("model_not_found") || c.eq_ignore_ascii_case("DeploymentNotFound")
    });
    let lower = message.to_ascii_lowercase();
    code_says || lower.contains("model") || lower.contains("deployment")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(code: u16, ec: Option<&str>, msg: &str) -> Outcome {
        Outcome::Status {
            code,
            error_code: ec.map(String::from),
            error_type: None,
            message: msg.into(),
        }
    }

    #[test]
    fn which_404s_mean_model_not_found() {
        let yes = [
            s(404, Some("model_not_found"), "The model `x` does not exist"),
            s(404, None, "model: claude-x"),
            s(
                404,
                None,
                "models/gemini-x is not found for API version v1beta",
            ),
            s(
                404,
                Some("DeploymentNotFound"),
                "The API deployment ... does not exist",
            ),
            s(404, None, "model 'llama' not found"),
        ];
        for o in &yes {
            assert!(is_model_not_found(o), "{o:?}");
        }
        let no = [
            s(404, None, "Not Found"),
            s(404, None, "No such file: file-abc"),
            s(400, Some("model_not_found"), "model"),
            s(500, None, "model overloaded"),
        ];
        for o in &no {
            assert!(!is_model_not_found(o), "{o:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn marks_expire_and_stay_bounded() {
        let m = MissingModels::default();
        let now = Instant::now();
        assert!(!m.is_missing("a", now));
        m.mark("a", now + Duration::from_secs(600), now);
        assert!(m.is_missing("a", now));
        assert!(!m.is_missing("b", now), "other models are not affected");
        tokio::time::advance(Duration::from_secs(599)).await;
        assert!(m.is_missing("a", Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            !m.is_missing("a", Instant::now()),
            "usable again after the duration"
        );
        let now = Instant::now();
        for i in 0..MODEL_CAP + 10 {
            let until = now + Duration::from_secs(100 + i as u64);
            m.mark(&format!("m{i}"), until, now);
        }
        assert_eq!(m.list(now).len(), MODEL_CAP, "bounded");
        assert!(!m.is_missing("m0", now), "the soonest to expire went first");
        assert!(m.is_missing(&format!("m{}", MODEL_CAP + 9), now));
    }
}
