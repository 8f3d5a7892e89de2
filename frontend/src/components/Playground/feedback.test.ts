import { describe, expect, test } from 'vitest'
import { demonstrationRow, kindOf, preferenceRow, toJsonl, type Message } from './feedback'
import { latestVersions, type Dataset } from './saveFeedback'

const convo: Message[] = [
  { role: 'system', content: 'You review Python code.' },
  { role: 'user', content: 'x = xs[len(xs)]' },
]

describe('feedback rows', () => {
  test('a demonstration is a chat row: the conversation, then the answer as the assistant', () => {
    const row = demonstrationRow(convo, 'Bug: index out of range; use xs[-1].\n')
    expect(row).toEqual({
      messages: [
        { role: 'system', content: 'You review Python code.' },
        { role: 'user', content: 'x = xs[len(xs)]' },
        { role: 'assistant', content: 'Bug: index out of range; use xs[-1].' },
      ],
    })
    expect(kindOf(row)).toBe('chat')
  })

  test('a preference pair: prompt messages, chosen and rejected as assistant messages', () => {
    const row = preferenceRow([{ role: 'user', content: '3+4' }], '7', '1\n')
    expect(row).toEqual({
      messages: [{ role: 'user', content: '3+4' }],
      chosen: [{ role: 'assistant', content: '7' }],
      rejected: [{ role: 'assistant', content: '1' }],
    })
    expect(kindOf(row)).toBe('preferences')
  })

  test('only role and content travel, and equal answers are refused (the server refuses them too)', () => {
    const extra = [{ role: 'user', content: 'hi', id: 3 } as Message]
    expect(demonstrationRow(extra, 'hello').messages[0]).toEqual({ role: 'user', content: 'hi' })
    expect(() => preferenceRow(extra, 'same', 'same\n')).toThrow(/same/)
  })

  test('toJsonl is one JSON object and a newline', () => {
    expect(toJsonl(demonstrationRow([{ role: 'user', content: 'a' }], 'b'))).toBe(
      '{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}\n',
    )
  })

  test('appending goes to the newest version of each lineage', () => {
    const d = (id: string, version: number, root: string | null, name = 'fb') => ({ id, version, root_id: root, name, builtin: false }) as Dataset
    const latest = latestVersions([d('ds_1', 1, null), d('ds_3', 3, 'ds_1'), d('ds_2', 2, 'ds_1'), d('ds_9', 1, null, 'other')])
    expect(latest.map((x) => x.id)).toEqual(['ds_3', 'ds_9'])
  })
})
