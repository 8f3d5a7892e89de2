// Monaco from the local package, never a CDN: @monaco-editor/react fetches it from jsDelivr
// unless `loader.config({ monaco })` hands it this bundle, which also fails offline.
import { loader } from '@monaco-editor/react'
import * as monaco from 'monaco-editor'
import EditorWorker from 'monaco-editor/editor/editor.worker?worker'
import TsWorker from 'monaco-editor/languages/features/typescript/ts.worker?worker'

self.MonacoEnvironment = {
  // JS/TS get their language service worker; every other language only needs the base worker.
  getWorker: (_id: string, label: string) =>
    label === 'typescript' || label === 'javascript' ? new TsWorker() : new EditorWorker(),
}

monaco.editor.defineTheme('thinker-dark', {
  base: 'vs-dark',
  inherit: true,
  rules: [],
  colors: {
    'editor.background': '#0d0d0d',
    'editor.lineHighlightBackground': '#161616',
    'editorLineNumber.foreground': '#3a3a3a',
    'editorCursor.foreground': '#0ea5e9',
  },
})

loader.config({ monaco })
