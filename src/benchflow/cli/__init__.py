"""Commands beside the sweep (`python -m benchflow <command>`), each a module with main(argv).

The top layer: a command may import any stage; no stage imports a command.
"""
