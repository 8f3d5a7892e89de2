// The deployments' notices not seen yet (a deployment whose latest event is promoted, refused
// or failed, not shown on its page in this browser since) as a small count: on the Models nav
// item and on the Deployments tab. Red when one failed, amber when one was refused, else green.
import { useUnseenNotices } from './noticesSeen'

export function NoticeBadge() {
  const notices = useUnseenNotices()
  if (notices.length === 0) return null
  const tone = notices.some((n) => n.event === 'failed') ? 'bg-bad' : notices.some((n) => n.event === 'refused') ? 'bg-warn' : 'bg-ok'
  const label = `${notices.length} new deployment notice${notices.length === 1 ? '' : 's'}`
  return (
    <span
      title={notices.map((n) => `${n.name}: ${n.event}`).join('\n')}
      className={`ml-2 inline-flex h-4 min-w-4 items-center justify-center rounded-full px-1 font-mono text-[10px] font-bold text-ink-950 ${tone}`}
      data-testid="notice-badge"
    >
      <span aria-hidden>{notices.length}</span>
      <span className="sr-only">{`, ${label}`}</span>
    </span>
  )
}
