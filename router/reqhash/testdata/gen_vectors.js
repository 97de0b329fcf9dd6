// Generates independent test vectors for reqhash from ECMAScript itself (node):
//   es_numbers.txt   IEEE-754 bits (hex) and String(x), for the number serializer;
//   jcs_vectors.json input texts and their RFC 8785 canonical form, for the canonicalizer.
// Deterministic. Regenerate with: node testdata/gen_vectors.js (from router/reqhash).
'use strict';
const fs = require('fs');
const path = require('path');

let seed = 0x9e3779b9;
function rnd() { // xorshift32
  seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
}
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (n) => Math.floor(rnd() * n);

// --- numbers ---
const buf = Buffer.alloc(8);
const numbers = new Map();
function addNumber(x) {
  if (!Number.isFinite(x)) return;
  buf.writeDoubleBE(x, 0);
  numbers.set(buf.toString('hex'), String(x));
}
for (let i = 0; i < 800; i++) { // random bit patterns
  for (let j = 0; j < 8; j++) buf[j] = int(256);
  addNumber(buf.readDoubleBE(0));
}
for (let e = -330; e <= 310; e++) { // every decimal exponent, a few significands
  for (const m of [1, 9.999999999999999, 3.3333333333333335]) addNumber(Number(m + 'e' + e));
}
for (let i = 0; i < 300; i++) addNumber(int(2 ** 31) * pick([1, -1]) / pick([1, 10, 100, 1000, 1e6, 1e7, 3, 7]));
for (let i = 0; i < 200; i++) addNumber((rnd() * 2 ** 53 - 2 ** 52) * pick([1, 1e-7, 1e-6, 1e20, 1e21, 1e-300]));
let lines = [...numbers].map(([h, s]) => h + ' ' + s);
fs.writeFileSync(path.join(__dirname, 'es_numbers.txt'), lines.join('\n') + '\n');

// --- documents ---
function canonical(v) { // RFC 8785 in a few lines of ECMAScript, as the RFC itself suggests
  if (Array.isArray(v)) return '[' + v.map(canonical).join(',') + ']';
  if (v !== null && typeof v === 'object') {
    return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canonical(v[k])).join(',') + '}';
  }
  return JSON.stringify(v);
}
const chars = ['a', 'b', 'z', 'A', 'Z', '0', '9', '_', '-', ' ', '"', '\\', '/', '\b', '\f', '\n', '\r', '\t',
  '\u0000', '\u0001', '\u001f', '\u007f', '\u0080', '\u00f6', '\u00e9', '\u20ac', '\u2028', '\u2029', '\ud7ff',
  '\ue000', '\uff5e', '\ufb33', '\ufffd', '\uffff', '\u{10000}', '\u{1f600}', '\u{1f44d}', '\u{10ffff}', '\u0430'];
function randString(max) {
  let s = '';
  for (let n = int(max); n > 0; n--) s += pick(chars);
  return s;
}
function randNumber() {
  switch (int(6)) {
    case 0: return int(1000) - 500;
    case 1: return (int(2 ** 30) * 2 ** 23 + int(2 ** 23)) * pick([1, -1]); // up to 2^53-1
    case 2: return Number((rnd() * 1000).toPrecision(1 + int(17)));
    case 3: return Number(pick(['1', '2.5', '9.87654321', '3']) + 'e' + (int(40) - 30));
    case 4: return pick([0, -0, 0.1, 0.2, 1e-7, 0.000001, 1.5e-323, 9007199254740991, -9007199254740991, 1e15]);
    default: return rnd() * 2 ** 50;
  }
}
function randValue(depth) {
  const k = depth > 4 ? int(4) : int(7);
  switch (k) {
    case 0: return randNumber();
    case 1: return randString(6);
    case 2: return pick([true, false, null]);
    case 3: return randNumber();
    case 4: { const a = []; for (let n = int(4); n > 0; n--) a.push(randValue(depth + 1)); return a; }
    default: return randObject(depth + 1);
  }
}
function randObject(depth) {
  const o = {};
  for (let n = int(5); n > 0; n--) o[randString(4)] = randValue(depth);
  return o;
}
// Write v as JSON text in a random but equivalent way: whitespace, escapes, number spellings.
function ws() { return pick(['', '', '', ' ', '\n', '\t ', '\r\n  ']); }
function writeString(s) {
  let out = '"';
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    const esc = (u) => '\\u' + u.toString(16).padStart(4, '0')[rnd() < 0.5 ? 'toUpperCase' : 'toLowerCase']();
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (cp < 0x20) out += JSON.stringify(ch).slice(1, -1) === ch ? esc(cp) : (rnd() < 0.5 ? JSON.stringify(ch).slice(1, -1) : esc(cp));
    else if (rnd() < 0.2) {
      if (cp > 0xffff) out += esc(ch.charCodeAt(0)) + esc(ch.charCodeAt(1));
      else if (ch === '/') out += '\\/';
      else out += esc(cp);
    } else out += ch;
  }
  return out + '"';
}
function writeNumber(x) {
  if (Object.is(x, -0)) return pick(['-0', '-0.0', '-0e0', '0']);
  let s = String(x).replace('e+', pick(['e+', 'E', 'e']));
  switch (int(4)) {
    case 0: if (/^-?\d+$/.test(s)) s += '.' + '0'.repeat(1 + int(3)); break;
    case 1: if (/^-?\d+$/.test(s)) s += pick(['e0', 'E+0', 'e-0']); break;
    case 2: if (/^-?\d+\.\d+$/.test(s)) s += '0'.repeat(1 + int(3)); break;
  }
  return s;
}
function write(v) {
  if (Array.isArray(v)) return '[' + ws() + v.map((e) => write(e)).join(ws() + ',' + ws()) + ws() + ']';
  if (v !== null && typeof v === 'object') {
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i > 0; i--) { const j = int(i + 1); [keys[i], keys[j]] = [keys[j], keys[i]]; }
    return '{' + ws() + keys.map((k) => writeString(k) + ws() + ':' + ws() + write(v[k])).join(ws() + ',' + ws()) + ws() + '}';
  }
  if (typeof v === 'string') return writeString(v);
  if (typeof v === 'number') return writeNumber(v);
  return JSON.stringify(v);
}
const docs = [];
for (let i = 0; i < 200; i++) {
  const v = randObject(0);
  const text = ws() + write(v) + ws();
  const back = JSON.parse(text);
  if (canonical(back) !== canonical(v)) throw new Error('writer is not faithful: ' + text);
  docs.push({ in: text, out: canonical(v) });
}
fs.writeFileSync(path.join(__dirname, 'jcs_vectors.json'), JSON.stringify(docs, null, 1) + '\n');
console.log(numbers.size, 'numbers,', docs.length, 'documents');
