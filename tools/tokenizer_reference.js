#!/usr/bin/env node
// tokenizer_reference.js - Hugging Face's tokenizers library (the Node binding
// that scripts/fetch_tokenizers.sh unpacks) as the reference for Strata's
// tokenizer.json support. Commands:
//
//   cases TOKENIZER_JSON > FIXTURE.tsv
//       the hard cases below, one line each: name, the UTF-8 text as hex, the
//       library's ids (added tokens matched, its default), and its ids with
//       special tokens as plain text (the library's tokenizer with the special
//       added tokens removed: what its encode_special_tokens mode gives, which
//       the binding does not expose). Checks that the library decodes the ids
//       back to the text. Deterministic (a fixed-seed generator).
//   sample BYTES OUT FILE...
//       writes to OUT about BYTES bytes of text: whole lines of the files in
//       turn (so no character is cut), as UTF-8.
//   encode TOKENIZER_JSON TEXT OUT
//       the library's ids of the file TEXT (UTF-8), one line, to OUT.
//   decode-all TOKENIZER_JSON IDS_OUT TEXT_OUT
//       every id, each followed by the id of "\n", to IDS_OUT; the library's
//       decoding of that whole sequence (one string, invalid UTF-8 replaced by
//       U+FFFD as the library does) to TEXT_OUT.
'use strict';
const fs = require('fs');
const path = require('path');

const nodeModules = process.env.STRATA_NODE_MODULES || path.join(__dirname, '..', 'vendor', 'node_modules');
let tokenizers;
try {
  tokenizers = require(path.join(nodeModules, '@anush008', 'tokenizers'));
} catch (e) {
  console.error(`tokenizer_reference: cannot load Hugging Face's tokenizers from ${nodeModules} ` +
    `(run scripts/fetch_tokenizers.sh): ${e.message}`);
  process.exit(2);
}
const { Tokenizer } = tokenizers;
const hfVersion = require(path.join(nodeModules, '@anush008', 'tokenizers', 'package.json')).version;

const load = file => Tokenizer.fromFile(file);
// The same tokenizer with its special added tokens removed: specials are text.
function loadPlain(file) {
  const j = JSON.parse(fs.readFileSync(file, 'utf8'));
  j.added_tokens = (j.added_tokens || []).filter(a => !a.special);
  return Tokenizer.fromString(JSON.stringify(j));
}
const ids = async (tk, text) => (await tk.encode(text, null, { addSpecialTokens: false })).getIds();

// ---- deterministic random text -------------------------------------------------
let seed = 20250117;
function rand() {               // mulberry32
  seed |= 0; seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = a => a[Math.floor(rand() * a.length)];
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
function randomCodePoint(max) {
  for (;;) {
    const cp = randInt(0x80, max);
    if (cp < 0xd800 || cp > 0xdfff) return String.fromCodePoint(cp);
  }
}
const WORDS = ['the', 'The', 'THE', 'of', 'and', 'is', 'Strata', 'tokenizer', 'Übermensch', 'naïve', 'straße', 'İstanbul',
  'Москва', '東京', 'नमस्ते', 'مرحبا', 'שלום', 'Ελλάδα', 'ﬁne', 'ǅemal', 'ſtore', 'ﬆ', 'Kelvin\u212a'];
const PUNCT = ['.', ',', ';', '!', '?', '"', "'", '(', ')', '-', '--', '—', '…', '/', '\\', '#', '$', '%', '&', '*', '_',
  '<', '>', '|', '«', '»', '“', '”', '’', '<|', '|>'];
const SPACES = [' ', ' ', ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', '\r', ' \n', '\n ', '\t\n', ' \r\n ', '\u00a0',
  '\u2009', '\u3000', '\u2028', '\u0085', '\ufeff', '\u200b', '\u000b', '\u000c', '\u001f'];
const OTHER = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'Ve", "'LL", "'lL", "'D", "'ſ", "'x", "''",
  '1', '12', '123', '1234', '12345', '3.14', '١٢٣', '１２３', 'Ⅻ', '²', '½', '😀', '👍🏽', '👨‍👩‍👧', '🇯🇵', '❤️',
  '\u0301', '\u0915\u094d', 'x\u0308', '\u0000', '\u007f', '<|endoftext|>', '<|begin_of_text|>', '<|eot_id|>',
  '<|end_of_text|>', '<|reserved_special_token_7|>', '<|python_tag|>', '<|im_start|>'];
function randomText(maxParts) {
  let s = '';
  const parts = randInt(1, maxParts);
  for (let i = 0; i < parts; i++) {
    const r = rand();
    if (r < 0.3) s += pick(WORDS);
    else if (r < 0.48) s += pick(SPACES);
    else if (r < 0.6) s += pick(PUNCT);
    else if (r < 0.77) s += pick(OTHER);
    else if (r < 0.87) s += randomCodePoint(0xffff);
    else if (r < 0.94) s += randomCodePoint(0x10ffff);
    else s += String.fromCharCode(randInt(0, 127));
  }
  return s;
}
const randomOf = (n, alphabet) => Array.from({ length: n }, () => pick(alphabet)).join('');

// ---- the cases ---------------------------------------------------------------------
function cases() {
  const c = [];
  const add = (name, text) => c.push([name, text]);
  add('empty', '');
  add('hello', 'Hello world');
  add('english', 'It is a truth universally acknowledged, that a single man in possession of a good fortune, ' +
    'must be in want of a wife.\n\n"Well," said Mr. O\'Brien -- who had, by 3 p.m. on 12/25/1899, walked 4.5 miles.');
  add('contractions_lower', "I'm you're he's she'll we've they'd can't won't don't it's 'tis rock'n'roll o'clock");
  add('contractions_upper', "I'M YOU'RE HE'S SHE'LL WE'VE THEY'D CAN'T WON'T DON'T IT'S");
  add('contractions_mixed', "It'S We'Re They'vE She'Ll He'D I'M don'T DON't You'rE 'S 'T 'Re 'vE 'lL 'D 'Ll");
  add('contractions_edge', "' '' ''' 's's 'ss 'sx 'ts 'r 'l 'v x' 'x 'ſ 'ſx 'ſtore 'ﬆx '\u212a 'K x'S");
  add('contractions_curly', 'don’t it’s we’re ‘quoted’');
  add('digits_runs', '0 1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890 ' +
    '31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348');
  add('digits_mixed', '3.14159 1,000,000 2024-05-20 0x1F 1e-9 -42 +7 99% $5.00 #1 No.9 abc123def456 x1 1x 2nd 16GB');
  add('digits_scripts', '١٢٣٤٥ ۱۲۳۴ १२३४५ ১২৩ ๑๒๓๔ １２３４ Ⅻ ⅻ ² ³ ¹ ½ ¾ ⑩ 〇 零 𝟘𝟙𝟚𝟛');
  add('long_digits', randomOf(700, '0123456789'));
  add('ws_runs', 'a  b   c    d\t\te\n\nf\n\n\ng \n h\t \tj  \n  k');
  add('ws_crlf', 'line one\r\nline two\r\n\r\nline four\r\n\r\r\n\n\r x \r\n\t\r\n  y');
  add('ws_leading_trailing', '   leading and trailing   ');
  add('ws_only', '     \t  ');
  add('ws_newlines_only', '\n\n\n\n');
  add('ws_before_newline', 'a \n b\t\n c  \r\n d \u00a0\n e');
  add('ws_punct_newline', 'end.\n\nnext!\r\n\r\nthen?? \n\n x...\n');
  add('ws_unicode', 'a\u00a0b a\u00a0 b a \u00a0b a\u3000b a\u2028b a\u2029b a\u2009b a\u202fb a\u205fb a\u1680b');
  add('ws_engines_differ', 'a\u0085b a\ufeffb \ufeffBOM a\u200bb a\u180eb a\u001cb a\u000bb a\u000cb \u0085\n x');
  add('ws_code', 'def f():\n    return 1\n\n\n    # indented\n        deeper\n\tif x:\n\t\treturn 2\n');
  add('code_c', '#include <stdio.h>\n\nint main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++)\n' +
    '        printf("%d: %s\\n", i, argv[i]);\n    return 0;\n}\n');
  add('code_json', '{"name": "strata", "list": ["a","b"], "n": [1,2,3], "nested": {"k": null}}');
  add('code_html', '<!DOCTYPE html>\n<html lang="en"><head><title>Hi &amp; bye</title></head></html>');
  add('emoji', '👍 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇯🇵🇺🇸 ❤️ 😀😃😄 🤖🚀 ✨ 🧑🏾‍💻 #️⃣ 1️⃣ 🏳️‍🌈 🏴‍☠️ 🏴󠁧󠁢󠁳󠁣󠁴󠁿');
  add('emoji_in_text', 'I ❤️ NY!! This is 🔥🔥🔥, right?😂 ok👍🏽ok');
  add('chinese', '我们需要在固态硬盘上训练大型语言模型。这是一个测试，包含标点符号！');
  add('japanese', 'こんにちは、世界。カタカナとひらがな、漢字が混ざった文です。ｶﾀｶﾅ');
  add('korean', '안녕하세요, 세계! 한국어 문장입니다.');
  add('arabic', 'مرحبا بالعالم. هذه جملة باللغة العربية، مع تشكيل: مُحَمَّد. ١٢٣');
  add('hebrew', 'שלום עולם! זה משפט בעברית עם ניקוד: בְּרֵאשִׁית.');
  add('devanagari', 'नमस्ते दुनिया। यह हिन्दी का वाक्य है। क्षत्रिय');
  add('thai', 'สวัสดีชาวโลก นี่คือประโยคภาษาไทย');
  add('russian', 'Привет, мир! Это предложение на русском языке. Ёлка, ёжик.');
  add('greek', 'Γειά σου κόσμε! ΑΒΓΔ αβγδ');
  add('vietnamese', 'Xin chào thế giới. Tiếng Việt có nhiều dấu: ắ ằ ẳ ẵ ặ.');
  add('combining', 'e\u0301 a\u0308 n\u0303 x\u0336y\u0336 Z\u0351\u0358\u0360a\u0360l\u0360g\u0360o\u0360 \u0301x');
  add('scripts_misc', 'ქართული Հայերեն አማርኛ தமிழ் ಕನ್ನಡ ᏣᎳᎩ ᚠᚢᚦ ⴰⵣⵓⵍ ꦗꦮ 𐌰𐌱 𓀀𓀁 𝔘𝔫𝔦𝔠𝔬𝔡𝔢');
  add('newer_unicode', '\u{31350}\u{2ebf0} \u{1e030}\u{1e04f} \u{10d40}\u{10d4a} \u{16d40} \u{11f00} \u{1fae8}' +
    ' \u{1CC00} \u{10EC2} \u{16EA0} \u{1E6C0} \u{10940}x \u{088f}y \u{a7ce}z');
  add('math', '∀x∈ℝ: x² ≥ 0 ∑ᵢ aᵢ·bᵢ ∫₀^∞ e^(−x) dx = 1 ≠ ≤ ≈ √2 ∞ ℵ₀ 𝔼[X]');
  add('latin1', Array.from({ length: 0x100 - 0xa0 }, (_, i) => String.fromCharCode(0xa0 + i)).join(''));
  add('ascii_all', Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join(''));
  add('ascii_pairs', Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i) + 'a').join(''));
  add('special_gpt2', 'first document<|endoftext|>second <|endoftext|> third<|endoftext|><|endoftext|>');
  add('special_llama3', '<|begin_of_text|>Hello<|eot_id|>\n<|start_header_id|>user<|end_header_id|>\n\nhi' +
    '<|reserved_special_token_0|><|reserved_special_token_247|><|reserved_special_token_248|><|end_of_text|>');
  add('special_partial', '<|begin_of_text <|endoftext| <| |> <|<|eot_id|>|> <<|python_tag|>> <|EOT_ID|> <|eot_id|x');
  add('special_qwen2', '<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user');
  add('long_letters', 'a'.repeat(1000));
  add('long_word_random', randomOf(900, 'abcdefghijklmnopqrstuvwxyz'));
  add('long_mixed_case', randomOf(400, 'aAbBcCdDeE'));
  add('long_punct', '='.repeat(300) + '-'.repeat(200) + '.'.repeat(100) + '!?'.repeat(90) + '\n'.repeat(5));
  add('long_spaces', ' '.repeat(500) + 'x' + ' '.repeat(300) + '\n' + '\t'.repeat(50));
  add('long_newlines', '\n'.repeat(300) + 'y' + '\n \t'.repeat(100) + '\r\n'.repeat(50));
  add('long_unicode_word', randomOf(300, ['é', 'ж', 'λ', 'ß', 'ø', 'ñ']));
  add('long_cjk', randomOf(500, ['的', '一', '是', '不', '了', '人', '我', '在']));
  add('long_emoji', randomOf(200, ['😀', '🔥', '👍', '❤', '✨', '🇯🇵']));
  for (let i = 0; i < 300; i++) add(`random_${i}`, randomText(i < 200 ? 40 : 200));
  for (let i = 0; i < 40; i++) {
    let s = '';
    for (let k = 0; k < 80; k++) s += randomCodePoint(k % 3 === 0 ? 0x10ffff : 0xffff) + pick(['', ' ', 'a', '1', '.', '\n', "'s"]);
    add(`codepoints_${i}`, s);
  }
  {
    let s = '';
    for (let cp = 0x80; cp < 0x800; cp++) s += 'x' + String.fromCodePoint(cp) + (cp % 2 ? ' ' : '1');
    add('codepoints_2byte_all', s);
  }
  return c;
}

// ---- commands ------------------------------------------------------------------------
async function cmdCases(file) {
  const tk = load(file), plain = loadPlain(file);
  const out = [];
  out.push(`# Hugging Face tokenizers (Rust 0.22 via @anush008/tokenizers ${hfVersion}) on ${path.basename(file)},`);
  out.push(`# made by tools/tokenizer_reference.js cases (node ${process.version}).`);
  out.push('# name<TAB>UTF-8 text as hex<TAB>ids (added tokens matched)<TAB>ids (special tokens as text)');
  for (const [name, text] of cases()) {
    const a = await ids(tk, text), b = await ids(plain, text);
    for (const [which, v, t] of [['', a, tk], [' (plain)', b, plain]]) {
      const back = await t.decode(v, false);
      if (back !== text) throw new Error(`case ${name}${which}: the library does not decode its ids back to the text`);
    }
    out.push(`${name}\t${Buffer.from(text, 'utf8').toString('hex')}\t${a.join(' ')}\t${b.join(' ')}`);
  }
  process.stdout.write(out.join('\n') + '\n');
}

function cmdSample(bytes, outFile, files) {
  const out = [];
  let size = 0;
  for (const f of files) {
    for (const line of fs.readFileSync(f, 'utf8').split(/(?<=\n)/)) {
      if (size >= bytes) break;
      out.push(line);
      size += Buffer.byteLength(line);
    }
  }
  fs.writeFileSync(outFile, out.join(''));
}

async function cmdEncode(file, textFile, outFile) {
  const text = fs.readFileSync(textFile, 'utf8');
  fs.writeFileSync(outFile, (await ids(load(file), text)).join(' ') + '\n');
}

async function cmdDecodeAll(file, idsOut, textOut) {
  const tk = load(file);
  const n = tk.getVocabSize(true), nl = tk.tokenToId('\u010a');   // "\n" in the byte alphabet
  if (nl === null) throw new Error(`${file}: no token for "\\n"`);
  const seq = [];
  for (let id = 0; id < n; id++) seq.push(id, nl);
  fs.writeFileSync(idsOut, seq.join(' ') + '\n');
  fs.writeFileSync(textOut, await tk.decode(seq, false));
}

(async () => {
  const [cmd, ...a] = process.argv.slice(2);
  if (cmd === 'cases' && a.length === 1) await cmdCases(a[0]);
  else if (cmd === 'sample' && a.length >= 3) cmdSample(Number(a[0]), a[1], a.slice(2));
  else if (cmd === 'encode' && a.length === 3) await cmdEncode(a[0], a[1], a[2]);
  else if (cmd === 'decode-all' && a.length === 3) await cmdDecodeAll(a[0], a[1], a[2]);
  else {
    console.error('usage: tokenizer_reference.js cases JSON | sample BYTES OUT FILE... | encode JSON TEXT OUT | ' +
      'decode-all JSON IDS_OUT TEXT_OUT');
    process.exit(2);
  }
})().catch(e => { console.error(`tokenizer_reference: ${e.message}`); process.exit(1); });
