// Accessibility props shared by form fields.

/** Props that tie an input to its error message (FieldError renders it as `<id>-error`). */
export function invalidProps(id: string, error: string | null | undefined) {
  return error ? { 'aria-invalid': true as const, 'aria-describedby': `${id}-error` } : {}
}
