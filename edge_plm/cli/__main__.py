from edge_plm.cli import main

main()
