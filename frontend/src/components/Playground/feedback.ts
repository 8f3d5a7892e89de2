// Feedback rows in the exact shapes of the server's dataset kinds (HOW_TO_USE.md "Datasets"):
// a demonstration is a `chat` row, a preference pair a `preferences` row.

export type Role = 'system' | 'user' | 'assistant'

export interface Message {
  role: Role
  content: string
}

export interface ChatRow {
  messages: Message[]
}

export interface PreferenceRow {
  messages: Message[]
  chosen: Message[]
  rejected: Message[]
}

export type FeedbackKind = 'chat' | 'preferences'
export type FeedbackRow = ChatRow | PreferenceRow

/** Only role and content travel: UI fields (ids, model names) would be kept as extra data. */
function clean(messages: Message[]): Message[] {
  return messages.map(({ role, content }) => ({ role, content }))
}

/** A thumbs-up or an edited answer: the conversation before it, then the answer. */
export function demonstrationRow(context: Message[], answer: string): ChatRow {
  return { messages: [...clean(context), { role: 'assistant', content: answer.trim() }] }
}

/** A preferred answer over another for the same prompt messages (DPO, reward models). */
export function preferenceRow(context: Message[], chosen: string, rejected: string): PreferenceRow {
  // Trailing newlines are sampling noise, not part of the answer a user judged.
  chosen = chosen.trim()
  rejected = rejected.trim()
  if (chosen === rejected) throw new Error('the preferred and the rejected answer are the same')
  return {
    messages: clean(context),
    chosen: [{ role: 'assistant', content: chosen }],
    rejected: [{ role: 'assistant', content: rejected }],
  }
}

export function kindOf(row: FeedbackRow): FeedbackKind {
  return 'chosen' in row ? 'preferences' : 'chat'
}

/** One JSONL line, the file a new feedback dataset is created from. */
export function toJsonl(row: FeedbackRow): string {
  return `${JSON.stringify(row)}\n`
}
