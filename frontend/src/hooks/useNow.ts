// The time now in epoch seconds, as state: "3 min ago" and "next in 2 h" move on every
// `everyMs` without a refetch (reading the clock while rendering would not be pure).
import { useEffect, useState } from 'react'

export function useNow(everyMs = 15_000): number {
  const [now, setNow] = useState(() => Date.now() / 1000)
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now() / 1000), everyMs)
    return () => clearInterval(timer)
  }, [everyMs])
  return now
}
