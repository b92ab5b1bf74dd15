// A scripted LangChain chat model: each turn answers with the next step
// (an AIMessage's fields, or a function of the messages the model was shown,
// so a step can read the tool replies). No network; bindTools keeps the
// tools, so a test can read what the model was told about them.
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage } from '@langchain/core/messages';

export class ScriptedChatModel extends BaseChatModel {
  constructor(steps) {
    super({});
    this.steps = steps;
    this.seen = [];
    this.tools = [];
  }

  _llmType() {
    return 'scripted';
  }

  bindTools(tools) {
    this.tools = tools;
    return this;
  }

  async _generate(messages) {
    this.seen.push(messages);
    const step = this.steps.shift();
    if (!step) throw new Error('the scripted model has no more steps');
    const fields = typeof step === 'function' ? step(messages) : step;
    return { generations: [{ text: '', message: new AIMessage({ content: '', ...fields }) }] };
  }
}

export function call(id, name, args) {
  return { id, name, args, type: 'tool_call' };
}

/** The tool replies among the messages, in order. */
export function toolReplies(messages) {
  return messages.filter((m) => m.getType() === 'tool');
}
