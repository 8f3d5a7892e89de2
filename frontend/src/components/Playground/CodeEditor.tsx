// The Monaco editor, in its own chunk: imported lazily so chat and A/B never load Monaco.
import Editor from '@monaco-editor/react'
import './monacoSetup'

interface Props {
  language: string
  value: string
  onChange: (value: string) => void
}

export default function CodeEditor({ language, value, onChange }: Props) {
  return (
    <Editor
      height="360px"
      theme="thinker-dark"
      language={language}
      value={value}
      onChange={(v) => onChange(v ?? '')}
      loading={<span className="text-sm text-neutral-500">Loading editor…</span>}
      options={{ minimap: { enabled: false }, fontSize: 13, scrollBeyondLastLine: false, padding: { top: 12 } }}
    />
  )
}
