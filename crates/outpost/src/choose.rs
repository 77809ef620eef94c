//! Which outpost `outpost start` serves.
//!
//! - `--outpost ID` (an `outpost_env-...` id) is looked up alone, `GET /outposts/{id}`: a 404
//!   is a one-line error naming the id. A token that may not read one outpost falls back to
//!   the list below.
//! - `--outpost NAME` (or an id the lookup could not check) is found in `GET /outposts`. A
//!   token that may not list outposts either is trusted with an id as given (the platform is
//!   then not checked).
//! - No `--outpost`: the account's only outpost. With several, a worker started on a terminal
//!   (stdin is a TTY) asks which one: a numbered list on stderr, a number read from stdin.
//!   Anywhere else it stops with the list of names and ids, since nobody can answer.
//!
//! The chosen outpost must serve this machine's platform.

use std::io::{BufRead, IsTerminal, Write};

use anyhow::{bail, Context};

use super::backoff::Backoff;
use super::fleet::{FleetClient, FleetError, Outpost, OutpostId};
use super::worker::platform_matches;

/// How many unreadable answers the prompt takes before it gives up.
const PROMPT_ATTEMPTS: usize = 3;

/// Why no outpost was chosen at the prompt.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PromptError {
    #[error("cannot ask which outpost to serve: {0}")]
    Io(#[from] std::io::Error),
    #[error("no outpost chosen (stdin ended); pass --outpost NAME|ID")]
    NoAnswer,
    #[error("no outpost chosen after {PROMPT_ATTEMPTS} answers that are not a number from 1 to {count}; pass --outpost NAME|ID")]
    Unreadable { count: usize },
}

/// Finds the outpost to serve and checks that this machine can serve it.
pub(crate) async fn resolve_outpost(
    client: &FleetClient,
    wanted: Option<&str>,
    platform: &str,
) -> anyhow::Result<OutpostId> {
    let chosen = match wanted {
        Some(wanted) => match as_outpost_id(wanted) {
            Some(id) => by_id(client, id).await?,
            None => by_name(client, wanted).await?,
        },
        None => by_default(client, platform).await?,
    };
    let Some(chosen) = chosen else {
        // Only an id can come back unchecked (see `by_name`).
        return wanted
            .and_then(as_outpost_id)
            .context("no outpost to serve");
    };
    if let Some(outpost_platform) = chosen.spec.platform.as_deref() {
        if !platform_matches(outpost_platform, platform) {
            bail!(
                "outpost {} ({}) serves {outpost_platform} machines and this one is {platform}: not claiming anything",
                chosen.spec.name,
                chosen.metadata.outpost_id
            );
        }
    }
    Ok(chosen.metadata.outpost_id)
}

/// `wanted` as an outpost id, if it is written as one (`outpost_env-...`); anything else is a
/// name.
fn as_outpost_id(wanted: &str) -> Option<OutpostId> {
    wanted
        .parse::<OutpostId>()
        .ok()
        .filter(|id| id.as_str().starts_with("outpost_env-"))
}

/// `GET /outposts/{id}`; `None`: serve the id unchecked (see `by_name`).
async fn by_id(client: &FleetClient, id: OutpostId) -> anyhow::Result<Option<Outpost>> {
    match retry_transient("look up the outpost", || client.outpost(&id)).await {
        Ok(Some(outpost)) => Ok(Some(outpost)),
        Ok(None) => bail!(
            "no outpost {id} in this account (`devin-bridge outpost list` shows its outposts)"
        ),
        Err(error) if error.is_auth() => {
            // A token may be allowed to list outposts but not to read one (the machine scope
            // of some deployments): the list decides.
            tracing::debug!(%error, outpost = %id, "cannot read the outpost alone; looking for it in the list");
            by_name(client, id.as_str()).await
        }
        Err(error) => Err(error).with_context(|| format!("cannot look up outpost {id}")),
    }
}

/// The outpost named or numbered `wanted` in `GET /outposts`; `None` when the token may not
/// list outposts and `wanted` is an id, which is then served as given.
async fn by_name(client: &FleetClient, wanted: &str) -> anyhow::Result<Option<Outpost>> {
    let outposts = match retry_transient("list outposts", || client.outposts()).await {
        Ok(outposts) => outposts,
        Err(error) if error.is_auth() => match as_outpost_id(wanted) {
            Some(id) => {
                tracing::warn!(%error, outpost = %id, "cannot list outposts to check the platform; serving the given id");
                return Ok(None);
            }
            None => bail!("cannot list outposts to find {wanted:?}: {error}"),
        },
        Err(error) => return Err(error).context("cannot list outposts"),
    };
    outposts
        .iter()
        .find(|o| o.metadata.outpost_id.as_str() == wanted || o.spec.name == wanted)
        .cloned()
        .map(Some)
        .with_context(|| {
            format!(
                "no outpost named or numbered {wanted:?} in this account (it has: {})",
                names(&outposts)
            )
        })
}

/// No `--outpost`: the only outpost, or (on a terminal) the one the user picks.
async fn by_default(client: &FleetClient, platform: &str) -> anyhow::Result<Option<Outpost>> {
    let outposts = match retry_transient("list outposts", || client.outposts()).await {
        Ok(outposts) => outposts,
        Err(error) => return Err(error).context("cannot list outposts"),
    };
    match outposts.as_slice() {
        [only] => return Ok(Some(only.clone())),
        [] => bail!("this account has no outpost; create one with `devin-bridge outpost create NAME --platform {platform}`"),
        _ => {}
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "--outpost is required: this account has {} outposts ({})",
            outposts.len(),
            names(&outposts)
        );
    }
    let mut offered = outposts;
    offered.sort_by(|a, b| {
        (&a.spec.name, &a.metadata.outpost_id).cmp(&(&b.spec.name, &b.metadata.outpost_id))
    });
    // The terminal is read with blocking calls, off the runtime's threads.
    let chosen = tokio::task::spawn_blocking(move || {
        let index = ask(
            &offered,
            &mut std::io::stdin().lock(),
            &mut std::io::stderr().lock(),
        )?;
        Ok::<Outpost, PromptError>(offered.swap_remove(index))
    })
    .await
    .context("the outpost prompt failed")??;
    tracing::info!(outpost = %chosen.metadata.outpost_id, name = %chosen.spec.name, "outpost chosen at the prompt");
    Ok(Some(chosen))
}

/// Asks which of `outposts` to serve: a numbered list and a prompt on `output`, one number per
/// line read from `input`. Returns the index of the chosen outpost.
pub(crate) fn ask(
    outposts: &[Outpost],
    input: &mut impl BufRead,
    output: &mut impl Write,
) -> Result<usize, PromptError> {
    let count = outposts.len();
    writeln!(
        output,
        "This account has {count} outposts. Which one should this worker serve?"
    )?;
    for (number, outpost) in (1..).zip(outposts) {
        writeln!(
            output,
            "  {number:>2}) {:<20} {:<32} {:<9} {} queued",
            outpost.spec.name,
            outpost.metadata.outpost_id,
            outpost.spec.platform.as_deref().unwrap_or("default"),
            outpost.status.queue_depth
        )?;
    }
    for _ in 0..PROMPT_ATTEMPTS {
        write!(output, "Outpost number (1-{count}): ")?;
        output.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            writeln!(output)?;
            return Err(PromptError::NoAnswer);
        }
        match line.trim().parse::<usize>() {
            Ok(number) if (1..=count).contains(&number) => return Ok(number - 1),
            _ => writeln!(
                output,
                "{:?} is not a number from 1 to {count}.",
                line.trim()
            )?,
        }
    }
    Err(PromptError::Unreadable { count })
}

/// Retries `call` with the queue's backoff while it fails transiently.
async fn retry_transient<T, F, Fut>(what: &str, mut call: F) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, FleetError>>,
{
    let mut backoff = Backoff::queue();
    loop {
        match call().await {
            Err(error) if error.is_transient() => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "cannot {what} yet");
                tokio::time::sleep(delay).await;
            }
            other => return other,
        }
    }
}

fn names(outposts: &[Outpost]) -> String {
    outposts
        .iter()
        .map(|o| format!("{} = {}", o.spec.name, o.metadata.outpost_id))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outposts() -> Vec<Outpost> {
        ["linux-a", "linux-b", "gpu"]
            .iter()
            .enumerate()
            .map(|(i, name)| {
                serde_json::from_value(serde_json::json!({
                    "metadata": {"outpost_id": format!("outpost_env-{i}")},
                    "spec": {"name": name, "platform": "linux"},
                }))
                .expect("outpost")
            })
            .collect()
    }

    fn run(answers: &str) -> (Result<usize, PromptError>, String) {
        let mut output = Vec::new();
        let result = ask(&outposts(), &mut answers.as_bytes(), &mut output);
        (result, String::from_utf8(output).expect("utf-8"))
    }

    #[test]
    fn the_prompt_numbers_every_outpost_and_takes_a_number() {
        let (result, output) = run("2\n");
        assert_eq!(result.expect("chosen"), 1);
        assert!(output.contains("3 outposts"), "{output}");
        assert!(output.contains(" 1) linux-a"), "{output}");
        assert!(output.contains(" 2) linux-b"), "{output}");
        assert!(output.contains("outpost_env-1"), "{output}");
        assert!(output.contains(" 3) gpu"), "{output}");
        assert!(output.ends_with("Outpost number (1-3): "), "{output}");
    }

    #[test]
    fn the_prompt_asks_again_after_an_unreadable_answer_and_gives_up_after_three() {
        let (result, output) = run(" 0\nlinux-a\n 3 \n");
        assert_eq!(result.expect("chosen"), 2);
        assert!(
            output.contains("\"0\" is not a number from 1 to 3"),
            "{output}"
        );
        assert!(output.contains("\"linux-a\" is not"), "{output}");
        let (result, _) = run("4\n\nx\n1\n");
        assert!(
            matches!(result, Err(PromptError::Unreadable { count: 3 })),
            "{result:?}"
        );
    }

    #[test]
    fn the_prompt_stops_when_stdin_ends() {
        let (result, _) = run("");
        assert!(matches!(result, Err(PromptError::NoAnswer)), "{result:?}");
        let (result, _) = run("9\n");
        assert!(matches!(result, Err(PromptError::NoAnswer)), "{result:?}");
    }

    #[test]
    fn only_outpost_env_ids_are_looked_up_by_id() {
        assert!(as_outpost_id("outpost_env-abc123").is_some());
        assert!(as_outpost_id("linux-fleet").is_none());
        assert!(as_outpost_id("outpost_env-a/b").is_none());
    }
}
