// The bridge estimates a prompt's tokens as ceil(chars / 4) of the serialized trace (what
// count_tokens answers and what the context-window check compares). This prints, for every
// serializer fixture with a trace of 200 characters or more, the estimate, the count of the
// public (legacy) Claude tokenizer, and their ratio.
//
//   npm --prefix tests/estimate install && node tests/estimate/measure.js
const { countTokens } = require('@anthropic-ai/tokenizer');
const fs = require('fs');
const path = require('path');

const dir = path.join(__dirname, '..', 'fixtures', 'serializer');
const header = '[Execution Trace]\n';
const rows = [];
for (const file of fs.readdirSync(dir).sort()) {
  const fixture = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const ok = fixture.expect && fixture.expect.ok;
  const prompt = ok && (ok.prompt || ok);
  if (!prompt || typeof prompt.text !== 'string' || !prompt.input_tokens) continue;
  const at = prompt.text.indexOf(header);
  if (at < 0) continue;
  const trace = prompt.text.slice(at + header.length);
  if (trace.length < 200) continue;
  const counted = countTokens(trace);
  rows.push({ file, chars: trace.length, estimate: prompt.input_tokens, counted, ratio: prompt.input_tokens / counted });
}
for (const r of rows) {
  console.log(`${r.file.padEnd(52)} ${String(r.chars).padStart(7)} chars  estimate ${String(r.estimate).padStart(6)}  tokenizer ${String(r.counted).padStart(6)}  ${r.ratio.toFixed(2)}x`);
}
const ratios = rows.map((r) => r.ratio);
console.log(`${rows.length} fixtures: estimate/tokenizer from ${Math.min(...ratios).toFixed(2)} to ${Math.max(...ratios).toFixed(2)}`);
