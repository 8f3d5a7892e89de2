// The review request: the same framing as the shipped code_review dataset (system "You review
// <Language> code.", the code as the user's message), so a model trained on it answers in kind.
import type { Message } from './feedback'

export const LANGUAGES = [
  { id: 'python', name: 'Python' },
  { id: 'javascript', name: 'JavaScript' },
  { id: 'typescript', name: 'TypeScript' },
  { id: 'go', name: 'Go' },
  { id: 'rust', name: 'Rust' },
  { id: 'java', name: 'Java' },
  { id: 'cpp', name: 'C++' },
  { id: 'sql', name: 'SQL' },
] as const

export function reviewMessages(languageId: string, code: string): Message[] {
  const name = LANGUAGES.find((l) => l.id === languageId)?.name ?? languageId
  return [
    { role: 'system', content: `You review ${name} code.` },
    { role: 'user', content: code },
  ]
}

export const SAMPLE_CODE = `def average(xs):
    total = 0
    for i in range(len(xs)):
        total += xs[i]
    return total / len(xs)
`
