//! Fixture tables: each file under `fixtures/` is a list of cases pinned here (R16.1).

use super::harness::run_file;

macro_rules! fixture {
    ($test:ident, $file:literal, $min:expr) => {
        #[test]
        fn $test() {
            let cases = run_file(include_str!(concat!("../fixtures/", $file)));
            assert!(cases >= $min, "{} has {cases} cases", $file);
        }
    };
}

fixture!(
    request_openai_to_anthropic,
    "request_openai_anthropic.txt",
    11
);
fixture!(
    request_anthropic_to_openai,
    "request_anthropic_openai.txt",
    11
);
fixture!(request_to_gemini, "request_gemini.txt", 6);
fixture!(request_refusals, "refusals.txt", 24);
fixture!(answers, "answers.txt", 19);
fixture!(stream_anthropic_to_openai, "stream_anthropic_openai.txt", 4);
fixture!(stream_openai_to_anthropic, "stream_openai_anthropic.txt", 4);
fixture!(stream_gemini, "stream_gemini.txt", 6);
fixture!(errors, "errors.txt", 14);
