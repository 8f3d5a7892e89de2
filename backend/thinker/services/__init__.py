"""Services below the routes and the CLI: each does one kind of work on the platform's data."""
