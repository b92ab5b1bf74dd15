// A scripted model for the Vercel AI SDK's own test model
// (MockLanguageModelV3 from ai/test): each turn answers with the next
// scripted step, which may read the prompt (the tool results so far).
import { MockLanguageModelV3 } from 'ai/test';

const usage = { inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 5, text: 5, reasoning: 0 } };

export function toolCall(id, toolName, input) {
  return { type: 'tool-call', toolCallId: id, toolName, input: JSON.stringify(input) };
}

export function scriptedModel(steps) {
  let turn = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      const step = steps[Math.min(turn++, steps.length - 1)];
      const content = typeof step === 'function' ? step(options.prompt) : step;
      const calls = content.some((c) => c.type === 'tool-call');
      return { content, finishReason: { unified: calls ? 'tool-calls' : 'stop', raw: undefined }, usage, warnings: [] };
    },
  });
  return model;
}

/** The texts of the tool results and errors the model was shown, in order. */
export function toolOutputs(prompt) {
  const out = [];
  for (const m of prompt) {
    if (m.role !== 'tool') continue;
    for (const part of m.content) {
      if (part.type !== 'tool-result') continue;
      const o = part.output;
      out.push({ toolCallId: part.toolCallId, type: o.type, text: typeof o.value === 'string' ? o.value : JSON.stringify(o.value) });
    }
  }
  return out;
}
