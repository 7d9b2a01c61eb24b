// bench/peer/generate.mjs — llama.cpp (node-llama-cpp 3.21.1, CPU) loads a GGUF and continues a
// prompt greedily: the outside check that a file toy wrote (a training checkpoint, `toy init`)
// is a standard GGUF, and a side-by-side for `toy infer MODEL -p PROMPT -n N --temp 0`; with
// LORA, a LoRA adapter toy wrote (`toy train lora`) applied at scale 1, as `toy infer --lora LORA`.
// The low-level sequence API is used on purpose: it takes the ids as they are (BOS as the
// vocabulary asks) and picks the argmax, with no penalties or prompt handling of its own.
// With --ids, the generated token ids are printed (comma-separated) instead of their text.
// MODEL may list several files separated by commas: each is loaded and continued in turn, one
// output line each, so that llama.cpp starts once (seconds) for all of them.
// usage: node generate.mjs MODEL[,MODEL…] PROMPT [N] [LORA] [--ids]
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const printIds = process.argv.includes("--ids");
const [modelPath, prompt, nArg, loraPath] = process.argv.slice(2).filter((a) => a !== "--ids");
if (!modelPath || prompt === undefined) {
  console.error("usage: node generate.mjs MODEL[,MODEL…] PROMPT [N] [LORA] [--ids]");
  process.exit(2);
}
const n = Number(nArg ?? 64);
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
for (const path of modelPath.split(",")) {
  const model = await llama.loadModel({modelPath: path, gpuLayers: 0});
  // One thread: llama.cpp's default (every core, spinning while it waits) can stall for minutes on
  // a machine busy with other work; greedy tokens do not depend on the thread count.
  const context = await model.createContext({
    contextSize: 1024,
    threads: 1,
    ...(loraPath ? {lora: {adapters: [{filePath: loraPath, scale: 1}]}} : {}),
  });
  const ids = model.tokenize(prompt);
  const addBos = model.fileInfo?.metadata?.tokenizer?.ggml?.add_bos_token;  // llama.cpp's default for SPM: true
  if (model.tokens.bos != null && addBos !== false) ids.unshift(model.tokens.bos);
  const out = [];
  for await (const token of context.getSequence().evaluate(ids, {temperature: 0})) {
    if (model.isEogToken(token) || out.push(token) >= n) break;
  }
  console.log(printIds ? out.join(",") : model.detokenize(out));
  await context.dispose();
  await model.dispose();
}
await llama.dispose();
