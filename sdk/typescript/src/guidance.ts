/**
 * What a model must know about a guarded tool, appended to its description:
 * the agent-layer test shows that a model that rephrases a failed call
 * reaches the same intent, and is refused.
 */
export const guardedToolGuidance =
  'Guarded by approvals: each call is performed at most once per intent. If a call fails or times out, ' +
  'do not call it again with other wording: the same intent is refused, and the earlier call may already have taken effect.';

export function withGuidance(description: string | undefined): string {
  return description ? `${description}\n\n${guardedToolGuidance}` : guardedToolGuidance;
}
