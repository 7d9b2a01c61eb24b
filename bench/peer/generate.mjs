// bench/peer/generate.mjs — llama.cpp (node-llama-cpp 3.21.1, CPU) loads a GGUF and continues a
// prompt greedily: the outside check that a file toy wrote (a training checkpoint, `toy init`)
// is a standard GGUF, and a side-by-side for `toy infer MODEL -p PROMPT -n N --temp 0`.
// usage: node generate.mjs MODEL PROMPT [N]
import {getLlama, LlamaLogLevel, LlamaCompletion} from "node-llama-cpp";

const [modelPath, prompt, nArg] = process.argv.slice(2);
if (!modelPath || prompt === undefined) {
  console.error("usage: node generate.mjs MODEL PROMPT [N]");
  process.exit(2);
}
const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const context = await model.createContext({contextSize: 512});
const completion = new LlamaCompletion({contextSequence: context.getSequence()});
const text = await completion.generateCompletion(prompt, {maxTokens: Number(nArg ?? 64), temperature: 0,
                                                          repeatPenalty: false});
console.log(text);
await context.dispose();
await model.dispose();
await llama.dispose();
