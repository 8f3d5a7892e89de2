// Rollout lines for the inspector's tests, in the shape _write_rollouts writes
// (backend/thinker/algorithms/rl.py): a step of four groups covering every filter, and a line
// from a run before episodes.

type Line = Record<string, unknown>

export const tok = (text: string, logprob: number, trainer: number | null, turn = 0) => ({ text, logprob, trainer_logprob: trainer, turn })

const single = (content: string, tokens: ReturnType<typeof tok>[], reward: number, advantage: number, extra: Line = {}) => ({
  turns: [{ role: 'assistant', content }],
  tokens, truncated: false, version: 3, reward, advantage, ...extra,
})

/** Group 1: single-turn, the second episode truncated. */
const sums: Line = {
  prompt: '3+4', answer: '7', completions: ['7', '77777'], rewards: [1, 0], advantages: [0.5, -0.5], dropped: false,
  episodes: [
    single('7', [tok('7', 0, -0.2), tok('<|im_end|>', -1, -1)], 1, 0.5),
    single('77777', [tok('77', -2.5, -2.5), tok('777', -5, -4.6), tok('\n', -0.5, -0.5), tok('', -0.1, -0.1)], 0, -0.5, { truncated: true }),
  ],
}

/** Group 2: tool use. Episode 1 calls the calculator, reads the result, answers; episode 2
 * writes a malformed call that the environment reports. */
const tools: Line = {
  prompt: '1234+5678', answer: '6912', completions: ['6912', '<tool_call>{"name": "calc'], rewards: [1, 0.2], advantages: [0.4, -0.4], dropped: false,
  episodes: [
    {
      turns: [
        { role: 'assistant', content: '<tool_call>{"name": "calculator", "arguments": {"expression": "1234+5678"}}</tool_call>', tool_call: { name: 'calculator', arguments: { expression: '1234+5678' } }, error: null },
        { role: 'tool', content: '6912' },
        { role: 'assistant', content: '6912' },
        { role: 'environment', content: 'correct' },
      ],
      tokens: [tok('<tool_call>', -0.1, -0.1, 0), tok('calculator', -0.3, -0.2, 0), tok('1234+5678', -0.2, -0.2, 0), tok('6912', -0.05, -0.05, 2), tok('<|im_end|>', -0.01, -0.01, 2)],
      truncated: false, version: 2, reward: 1, advantage: 0.4,
    },
    {
      turns: [
        { role: 'assistant', content: '<tool_call>{"name": "calc', tool_call: null, error: 'a <tool_call> was opened and never closed with </tool_call>' },
        { role: 'tool', content: 'tool error: a <tool_call> was opened and never closed with </tool_call>' },
        { role: 'user', content: 'Answer with a number.' },
      ],
      tokens: [tok('<tool_call>', -0.4, -0.4, 0), tok('{"name": "calc', -3, -3, 0)],
      truncated: false, version: 2, reward: 0.2, advantage: -0.4,
    },
  ],
}

/** Group 3: all rewards equal, dropped, so never trained (no trainer logprobs). */
const dropped: Line = {
  prompt: '9+9', answer: '18', completions: ['17', '19'], rewards: [0, 0], advantages: [0, 0], dropped: true,
  episodes: [single('17', [tok('17', -1, null)], 0, 0), single('19', [tok('19', -1.5, null)], 0, 0)],
}

/** Group 4: zero advantage but kept (trained with no signal). */
const even: Line = {
  prompt: '2+2', answer: '4', completions: ['4', 'four'], rewards: [0.5, 0.5], advantages: [0, 0], dropped: false,
  episodes: [single('4', [tok('4', -0.3, -0.3), tok('.', -0.2, -0.2)], 0.5, 0), single('four', [tok('fo', -1, -1.1), tok('ur', -0.5, -0.6)], 0.5, 0)],
}

export const stepLines = (): Line[] => [sums, tools, dropped, even]

/** A line of a run from before environments: no episodes. */
export const oldLine = (): Line => ({ prompt: 'srn', answer: 'nrs', completions: ['nrs', 'rsn!'], rewards: [1, 0], advantages: [0.5, -0.5], dropped: false })
