// bench/peer/generate.mjs — llama.cpp (node-llama-cpp 3.21.1, CPU) loads a GGUF and continues a
// prompt greedily: the outside check that a file toy wrote (a training checkpoint, `toy init`)
// is a standard GGUF, and a side-by-side for `toy infer MODEL -p PROMPT -n N --temp 0`.
// The low-level sequence API is used on purpose: it takes the ids as they are (BOS as the
// vocabulary asks) and picks the argmax, with no penalties or prompt handling of its own.
// usage: node generate.mjs MODEL PROMPT [N]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const [modelPath, prompt, nArg] = process.argv.slice(2);
if (!modelPath || prompt === undefined) {
  console.error("usage: node generate.mjs MODEL PROMPT [N]");
  process.exit(2);
}
const n = Number(nArg ?? 64);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 1024});
const ids = model.tokenize(prompt);
const addBos = model.fileInfo?.metadata?.tokenizer?.ggml?.add_bos_token;  // llama.cpp's default for SPM: true
if (model.tokens.bos != null && addBos !== false) ids.unshift(model.tokens.bos);
const out = [];
for await (const token of context.getSequence().evaluate(ids, {temperature: 0})) {
  if (model.isEogToken(token) || out.push(token) >= n) break;
}
console.log(model.detokenize(out));
await context.dispose();
await model.dispose();
await llama.dispose();
