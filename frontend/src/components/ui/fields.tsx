// Form fields: a label over its control, a number field with its help, and a field's problem
// shown under it, tied to the input (aria-invalid, aria-describedby) so a screen reader reads
// it too.
import type { ReactNode } from 'react'
import { invalidProps } from './aria'
import { InfoTip } from './InfoTip'

/** A label over its control. */
export function Field({ label, children, className = '' }: { label: string; children: ReactNode; className?: string }) {
  return (
    <label className={`flex flex-col ${className}`}>
      <span className="label">{label}</span>
      {children}
    </label>
  )
}

/** The message under a field; its id is what the input's aria-describedby names. */
export function FieldError({ id, error }: { id: string; error: string | null | undefined }) {
  if (!error) return null
  return <p id={`${id}-error`} role="alert" className="mt-1 text-xs text-bad">{error}</p>
}

export function NumberField({
  id,
  label,
  help,
  value,
  onChange,
  error,
  placeholder,
}: {
  id: string
  label: string
  help: ReactNode
  value: string
  onChange: (v: string) => void
  error?: string | null
  placeholder?: string
}) {
  return (
    <div>
      <label htmlFor={id} className="label flex items-center gap-1.5">{label} <InfoTip label={`About ${label}`}>{help}</InfoTip></label>
      <input
        id={id}
        className={`input font-mono ${error ? 'border-bad/70 focus:border-bad' : ''}`}
        inputMode="decimal"
        value={value}
        placeholder={placeholder}
        onChange={(e) => onChange(e.target.value)}
        {...invalidProps(id, error)}
      />
      <FieldError id={id} error={error} />
    </div>
  )
}

