"""Phone number normalisation with libphonenumber (the ``phonenumbers`` package)."""
