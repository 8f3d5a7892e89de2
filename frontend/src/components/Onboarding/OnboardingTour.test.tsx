import { cleanup, fireEvent, render, screen } from '@testing-library/react'
import { MemoryRouter } from 'react-router-dom'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { useUiStore } from '../../state/ui'
import { TourCard } from '../../views/Settings/TourCard'
import { OnboardingTour } from './OnboardingTour'
import { TOUR_STEPS } from './steps'

function renderWithNav() {
  return render(
    <MemoryRouter>
      <nav>
        {['training', 'models', 'datasets', 'playground', 'analytics', 'settings'].map((v) => (
          <a key={v} data-tour={`nav-${v}`} href={`/${v}`}>{v}</a>
        ))}
      </nav>
      <TourCard />
      <OnboardingTour />
    </MemoryRouter>,
  )
}

beforeEach(() => useUiStore.setState({ tourDone: false }))
// Vitest runs without globals here, so Testing Library cannot register its own cleanup.
afterEach(cleanup)

describe('OnboardingTour', () => {
  test('shows on a first visit and walks the nav items in order', () => {
    renderWithNav()
    expect(screen.getByRole('dialog', { name: 'Onboarding tour' })).toHaveTextContent('Welcome to Thinker')
    fireEvent.click(screen.getByRole('button', { name: 'Show me around' }))
    expect(screen.getByRole('dialog')).toHaveTextContent('Step 2 of')
    expect(screen.getByRole('dialog')).toHaveTextContent('Tinker API key')
    fireEvent.click(screen.getByRole('button', { name: 'Next' }))
    expect(screen.getByRole('dialog')).toHaveTextContent(TOUR_STEPS[2].title)
    fireEvent.click(screen.getByRole('button', { name: 'Back' }))
    expect(screen.getByRole('dialog')).toHaveTextContent('Settings')
  })

  test('Skip tour hides it for good', () => {
    renderWithNav()
    fireEvent.click(screen.getByRole('button', { name: 'Skip tour' }))
    expect(screen.queryByRole('dialog')).toBeNull()
    expect(useUiStore.getState().tourDone).toBe(true)
  })

  test('not shown once done; Settings restarts it from the first step', () => {
    useUiStore.setState({ tourDone: true })
    renderWithNav()
    expect(screen.queryByRole('dialog')).toBeNull()
    fireEvent.click(screen.getByRole('button', { name: 'Restart the tour' }))
    expect(useUiStore.getState().tourDone).toBe(false)
    expect(screen.getByRole('dialog')).toHaveTextContent('Welcome to Thinker')
  })

  test('the last step finishes the tour', () => {
    renderWithNav()
    for (let i = 0; i < TOUR_STEPS.length - 1; i++) fireEvent.click(screen.getByRole('button', { name: i === 0 ? 'Show me around' : 'Next' }))
    expect(screen.getByRole('dialog')).toHaveTextContent("You're ready")
    fireEvent.click(screen.getByRole('button', { name: 'Start training' }))
    expect(useUiStore.getState().tourDone).toBe(true)
  })
})
