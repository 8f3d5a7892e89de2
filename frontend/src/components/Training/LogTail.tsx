// The worker's log: what was written before the page opened (GET /logs) followed by the live
// lines of the socket. The socket replays from seq 1, so its lines overlap the fetched tail;
// lines already shown are skipped (each carries a step or a path, so repeats are rare).
import { useEffect, useRef } from 'react'
import { ErrorState, Loading } from '../ui/States'
import { useJobLogs } from './queries'

function mergeLogs(before: readonly string[], live: readonly string[]): string[] {
  const seen = new Set(before)
  return [...before, ...live.filter((l) => !seen.has(l))]
}

export function LogTail({ jobId, live }: { jobId: string; live: readonly string[] }) {
  const logs = useJobLogs(jobId)
  const box = useRef<HTMLPreElement>(null)
  const lines = mergeLogs(logs.data?.lines ?? [], live)
  // Follow the tail, as `tail -f` does.
  useEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight
  }, [lines.length])
  if (logs.isLoading) return <Loading what="the log" />
  if (logs.isError) return <ErrorState error={logs.error} what="the log" />
  return (
    <div className="card p-0">
      <div className="flex items-center justify-between border-b border-ink-700 px-4 py-2 text-xs text-neutral-500">
        <span>worker.log — {lines.length} lines{logs.data && logs.data.total_lines > logs.data.lines.length ? ` (last ${logs.data.lines.length} of ${logs.data.total_lines} before this page opened)` : ''}</span>
        <span className="flex items-center gap-2"><span className="led bg-accent animate-pulse" /> live</span>
      </div>
      <pre ref={box} data-testid="log-tail" className="max-h-96 overflow-auto p-4 font-mono text-xs leading-relaxed text-neutral-300">
        {lines.length ? lines.join('\n') : 'No output yet: the worker writes here once it starts.'}
      </pre>
    </div>
  )
}
