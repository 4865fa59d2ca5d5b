"""Commands beside the sweep (`benchflow <command>`), each a module with main(argv).

The top layer: a command may import any stage; no stage imports a command.
"""
