//! `SHOW COMMANDS` / `HELP`: every command and what it answers.

use crate::admin::parse::COMMANDS;
use crate::admin::Answer;

/// The command list.
pub fn answer() -> Answer {
    let mut answer = Answer::new(&["command", "answer"]);
    for (form, description) in COMMANDS {
        answer.push(vec![(*form).into(), (*description).into()]);
    }
    answer
}
