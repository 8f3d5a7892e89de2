// The tour's steps (seed plan 4.5): a welcome, then each view's nav item, then what to do first.
export interface TourStep {
  /** The `data-tour` attribute of the element to point at; none = a centred card. */
  target?: string
  title: string
  body: string
}

export const TOUR_STEPS: TourStep[] = [
  { title: 'Welcome to Thinker', body: "Let's train your first model. This short tour shows where everything lives — it takes a minute, and you can skip it." },
  { target: 'nav-settings', title: 'Settings', body: 'Add your Tinker API key here if you train on Tinker. Local jobs on the built-in models need no key. API tokens and the server’s configuration are here too.' },
  { target: 'nav-datasets', title: 'Datasets', body: 'Upload your training data here. Every row is validated and previewed — kind, field mapping, what gets trained — before anything is stored. Or import from Hugging Face.' },
  { target: 'nav-training', title: 'Training', body: 'Start training jobs here. The wizard walks you from goal to data to settings, estimates the time, and shows live charts while it trains.' },
  { target: 'nav-models', title: 'Models', body: 'Every checkpoint becomes a model with its lineage: base model, dataset version, job and step. Download adapters or export merged weights.' },
  { target: 'nav-playground', title: 'Playground', body: 'Test your trained models here: chat, review code, or compare two side by side. Rate or correct answers to build the data for your next job.' },
  { target: 'nav-analytics', title: 'Analytics', body: 'Overlay runs, see which settings differ, and compare evaluation results across models.' },
  { title: "You're ready", body: 'Open Training and click “New job” (or the wizard) to start your first run. You can restart this tour from Settings.' },
]
