"""What the CLI's commands compute (data, model, train, doctor, plots), as plain results the
thin typer layer in `edge_plm.cli` prints."""
