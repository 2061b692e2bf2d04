// estimate-calibrate.mjs: the calibration of fcgi/estimate.c (R-GUARD-2). Counts the
// sample texts (bench/estimate-samples: prose one paragraph each; code: 30-line blocks
// of fcgi/guard.c and tests/it/t0110-cache.py) with a real BPE tokenizer and writes
// tests/unit/estimate_fixtures.h, which test_estimate checks the estimate against.
//   cd /tmp/calib && npm install gpt-tokenizer && node SRC/bench/estimate-calibrate.mjs SRC
import fs from 'fs';
import path from 'path';
import { createRequire } from 'module';
const src = process.argv[2] || '.';
const require = createRequire(path.join(process.cwd(), 'x.js'));
const cl = require('gpt-tokenizer/cjs/encoding/cl100k_base');
const o2 = require('gpt-tokenizer/cjs/encoding/o200k_base');
const read = (f) => fs.readFileSync(path.join(src, f), 'utf8');
const rows = [];
for (const cls of ['english', 'chinese', 'japanese'])
  for (const p of read(`bench/estimate-samples/${cls}.txt`).split('\n').filter((x) => x.trim()))
    rows.push({ cls, text: p });
let block = 0;
for (const f of ['fcgi/guard.c', 'tests/it/t0110-cache.py']) {
  const lines = read(f).split('\n');
  for (let i = 0; i < lines.length; i += 30)
    if (block++ % 4 === 0) rows.push({ cls: 'code', text: lines.slice(i, i + 30).join('\n') });
}
const cstr = (s) => '"' + [...Buffer.from(s, 'utf8')].map((b) =>
  b === 0x22 ? '\\"' : b === 0x5c ? '\\\\' : b === 0x0a ? '\\n' : b === 0x09 ? '\\t' :
  (b < 0x20 || b >= 0x7f) ? '\\' + b.toString(8).padStart(3, '0') : String.fromCharCode(b)).join('') + '"';
let out = '/* estimate_fixtures.h: calibration texts of the prompt-token estimate with their real\n' +
  ' * token counts (cl100k_base, o200k_base), made by bench/estimate-calibrate.mjs. */\n' +
  'static const struct { const char *cls; const char *text; int cl100k, o200k; } estimate_fixtures[] = {\n';
for (const r of rows) out += `    {"${r.cls}", ${cstr(r.text)}, ${cl.encode(r.text).length}, ${o2.encode(r.text).length}},\n`;
fs.writeFileSync(path.join(src, 'tests/unit/estimate_fixtures.h'), out + '};\n');
console.log(`${rows.length} texts`);
