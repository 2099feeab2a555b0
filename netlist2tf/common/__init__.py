"""What every stage shares: the error types (``Netlist2TFError`` and its kinds, each a message for the
user), reading inputs (size limits, encodings), writing outputs without overwriting or deleting what a
user made, the build folder, and the machine (memory, progress lines)."""

from .lazy import public

__getattr__, __dir__, __all__ = public(__name__, {
    'errors': ('DesignElaborationError', 'DesignNotFoundError', 'Netlist2TFError', 'NetlistFormatError',
               'StimulusError', 'UnsupportedDesignError', 'YosysError'),
    'hardware': ('Progress', 'available_memory', 'default_dtype', 'drop_kernel_notes', 'gigabytes',
                 'quiet_transformers', 'where_it_runs'),
    'inputs': ('MAX_SMALL_TEXT_BYTES', 'lines', 'read_limited', 'read_text'),
    'outputs': ('OutputError', 'PROGRESS_MAGIC', 'cache_lock', 'check_build_dir', 'check_output_file', 'check_room',
                'check_output_folder', 'destination', 'file_beside', 'file_writer', 'first_line', 'streamed', 'write_file',
                'write_folder'),
    'paths': ('ENV', 'build_dir', 'prune_cache', 'source_digest'),
})
