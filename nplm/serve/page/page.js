// The page of `nplm serve`: plain JavaScript, nothing fetched but this server's answers.
"use strict";

const $ = (id) => document.getElementById(id);

async function ask(path, body, signal) {
  const response = await fetch(path, {method: "POST", body: JSON.stringify(body), signal,
                                      headers: {"Content-Type": "application/json"}});
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

function item(text, detail) {
  const li = document.createElement("li");
  li.append(text);
  const span = document.createElement("span");
  span.className = "probability";
  span.textContent = detail;
  li.append(span);
  return li;
}

// Completion: one request at a time, sent once typing pauses (COMPLETE_PAUSE_MS); a newer
// keystroke aborts the request still in flight, so the server never holds stale ones.
const COMPLETE_PAUSE_MS = 150;
let pause = null;
let inFlight = null;

function completeSoon() {
  clearTimeout(pause);
  pause = setTimeout(complete, COMPLETE_PAUSE_MS);
}

async function complete() {
  if (inFlight) inFlight.abort();
  const controller = inFlight = new AbortController();
  const prefix = $("prefix").value;
  try {
    const answer = await ask("/complete", {prefix, k: 8, max_words: 3}, controller.signal);
    if (controller !== inFlight) return;
    $("complete-error").textContent = "";
    $("completions").replaceChildren(...answer.completions.map(
        (c) => item(c.text, `${(100 * c.probability).toPrecision(3)}%`)));
  } catch (error) {
    if (error.name !== "AbortError") $("complete-error").textContent = error.message;
  }
}

async function rank() {
  const texts = $("alternatives").value.split("\n").filter((line) => line.trim());
  try {
    const answer = await ask("/rank", {texts});
    $("rank-error").textContent = "";
    $("ranked").replaceChildren(...answer.ranked.map(
        (r) => item(r.text, `ln p ${r.log_prob.toFixed(2)}`)));
  } catch (error) {
    $("rank-error").textContent = error.message;
  }
}

async function score() {
  try {
    const answer = await ask("/score", {texts: [$("sentence").value], tokens: true});
    const tokens = answer.scores[0].tokens;
    const widest = Math.max(...tokens.map((t) => -t.log_prob), 1e-9);
    $("score-error").textContent = "";
    $("bars").replaceChildren(...tokens.map((t) => {
      const row = document.createElement("div");
      row.className = "bar-row";
      const label = document.createElement("span");
      label.className = "bar-label";
      label.textContent = t.word;
      const bar = document.createElement("span");
      bar.className = t.oov ? "bar oov" : "bar";
      bar.style.width = `${(20 * -t.log_prob / widest).toFixed(2)}rem`;
      const value = document.createElement("span");
      value.className = "bar-value";
      value.textContent = t.log_prob.toFixed(2);
      row.append(label, bar, value);
      return row;
    }));
  } catch (error) {
    $("score-error").textContent = error.message;
  }
}

async function correct() {
  try {
    const answer = await ask("/correct", {texts: [$("typed").value]});
    const correction = answer.corrections[0];
    $("correct-error").textContent = "";
    $("corrected").replaceChildren(correction.corrected);
    if (correction.changes.length) {
      const gain = document.createElement("span");
      gain.className = "probability";
      gain.textContent = "ln P(w) P(typed | w) +" +
          (correction.log_prob - correction.typed_log_prob).toFixed(2);
      $("corrected").append(gain);
    }
    $("changes").replaceChildren(...correction.changes.map((c) => {
      const li = document.createElement("li");
      li.textContent = `${c.typed} → ${c.corrected}`;
      return li;
    }));
  } catch (error) {
    $("correct-error").textContent = error.message;
  }
}

async function describeRun() {
  const response = await fetch("/info");
  const info = await response.json();
  const ppl = Object.entries(info.perplexities)
      .map(([split, value]) => `${split} perplexity ${value.toFixed(1)}`).join(", ");
  $("run").textContent = `${info.model} on ${info.dataset}, |V| = ` +
      `${info.vocab_size.toLocaleString("en")}${ppl ? "; " + ppl : ""} (${info.workdir})`;
}

$("prefix").addEventListener("input", completeSoon);
$("rank").addEventListener("click", rank);
$("score").addEventListener("click", score);
$("correct").addEventListener("click", correct);
describeRun();
complete();
